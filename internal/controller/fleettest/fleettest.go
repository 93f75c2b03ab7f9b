// Package fleettest holds what the controller's packages' tests share: a
// fleet and its resolved spec, and the decoding of an apply configuration
// the way the API server reads it. Only tests import it.
package fleettest

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// NewMemcached is the fleet ns/cache at generation 3 with the spec mutate
// makes, and that spec resolved with test images.
func NewMemcached(mutate func(*cachev1alpha1.MemcachedSpec)) (*cachev1alpha1.Memcached, *cachev1alpha1.MemcachedSpec) {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 3}}
	if mutate != nil {
		mutate(&mc.Spec)
	}
	return mc, policy.Resolve(&mc.Spec, policy.Config{DefaultImage: "memcached:test", ExporterImage: "operator:test"})
}

// WithTLS enables TLS with the issuer "ca", then applies mutate.
func WithTLS(mutate func(*cachev1alpha1.TLSSpec)) func(*cachev1alpha1.MemcachedSpec) {
	return func(s *cachev1alpha1.MemcachedSpec) {
		s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}}
		if mutate != nil {
			mutate(s.TLS)
		}
	}
}

// RoundTrip decodes an apply configuration into its API type, the way the
// API server reads the apply request.
func RoundTrip(in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// Pod is a ready pod of the fleet "cache" on node n1; with a message, one
// no node fits, the scheduler saying message. mutate changes it further.
func Pod(name, message string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{
			"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "cache", "app.kubernetes.io/managed-by": "memcached-operator"}},
		Spec:   corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "memcached"}}},
		Status: corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if message != "" {
		p.Spec.NodeName = ""
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: message}}
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}
