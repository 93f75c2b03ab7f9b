package memcached

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// ServiceMonitorGVK is prometheus-operator's ServiceMonitor. The operator
// does not depend on its CRDs: it asks the RESTMapper whether the API is
// served when a fleet wants one, so it starts without them and notices when
// they are installed later.
var ServiceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// monitoringState is what the ServiceMonitor phase found.
type monitoringState struct {
	wanted, applied, apiMissing, removed bool
}

// reconcileServiceMonitor keeps the fleet's ServiceMonitor equal to its spec.
// Fleets that never asked for one cost nothing: no discovery, no read. The
// object is read live (an informer would need the CRD at start), so a pass
// over a monitored fleet makes one GET and, when nothing changed, no write.
func (r *Reconciler) reconcileServiceMonitor(ctx context.Context, s *scope) error {
	wanted := policy.ServiceMonitorEnabled(s.spec) && policy.ExporterEnabled(s.spec)
	key := client.ObjectKeyFromObject(s.memcached)
	// The condition says a ServiceMonitor may exist; so does this process's
	// own memory of applying one, which a pass can need first: when the spec
	// turns monitoring off right after the pass that created it, the next
	// pass may read the fleet from the cache before the status write that
	// added the condition has arrived there.
	_, applied := r.monitored.Load(key)
	had := applied || meta.FindStatusCondition(s.memcached.Status.Conditions, cachev1alpha1.ConditionServiceMonitorReady) != nil
	if !wanted && !had {
		return nil
	}
	s.monitoring = &monitoringState{wanted: wanted}
	if _, err := r.Client.RESTMapper().RESTMapping(ServiceMonitorGVK.GroupKind(), ServiceMonitorGVK.Version); meta.IsNoMatchError(err) {
		s.monitoring.apiMissing = true
		return nil
	} else if err != nil {
		return fmt.Errorf("discovering %s: %w", ServiceMonitorGVK, err)
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(ServiceMonitorGVK)
	err := r.apiReader().Get(ctx, key, live)
	exists := err == nil
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading ServiceMonitor %s: %w", key, err)
	case exists && !metav1.IsControlledBy(live, s.memcached):
		if !wanted {
			r.monitored.Delete(key)
			s.monitoring.removed = true
			return nil
		}
		return nameConflict("ServiceMonitor", live)
	case !wanted:
		if exists {
			if err := r.Client.Delete(ctx, live, client.Preconditions{UID: ptr.To(live.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting ServiceMonitor %s: %w", key, err)
			}
		}
		r.monitored.Delete(key)
		s.monitoring.removed = true
		return nil
	}
	r.monitored.Store(key, struct{}{})
	desired := BuildServiceMonitor(s.memcached, s.spec)
	if exists && serviceMonitorMatches(live, desired) {
		applyRequests.WithLabelValues("ServiceMonitor", applySkipped).Inc()
		s.monitoring.applied = true
		return nil
	}
	applyRequests.WithLabelValues("ServiceMonitor", applySent).Inc()
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return applyError("ServiceMonitor", key, err)
	}
	if !exists {
		s.markCreated("ServiceMonitor")
	}
	s.monitoring.applied = true
	return nil
}

// BuildServiceMonitor is the fleet's ServiceMonitor: it selects the fleet's
// Service and scrapes the exporter's metrics port.
func BuildServiceMonitor(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *unstructured.Unstructured {
	sm := spec.Monitoring.ServiceMonitor
	endpoint := map[string]any{"port": metricsPortName, "path": "/metrics"}
	if iv := ptr.Deref(sm.Interval, ""); iv != "" {
		endpoint["interval"] = iv
	}
	labels := map[string]any{}
	for k, v := range sm.Labels {
		labels[k] = v
	}
	for k, v := range objectLabels(mc.Name) {
		labels[k] = v
	}
	selector := map[string]any{}
	for k, v := range selectorLabels(mc.Name) {
		selector[k] = v
	}
	owner, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&metav1.OwnerReference{
		APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached", Name: mc.Name, UID: mc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})
	if err != nil {
		panic(fmt.Sprintf("converting an owner reference: %v", err))
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": mc.Name, "namespace": mc.Namespace, "labels": labels, "ownerReferences": []any{owner},
		},
		"spec": map[string]any{
			"selector":          map[string]any{"matchLabels": selector},
			"namespaceSelector": map[string]any{"matchNames": []any{mc.Namespace}},
			"endpoints":         []any{endpoint},
		},
	}}
	u.SetGroupVersionKind(ServiceMonitorGVK)
	return u
}

// serviceMonitorMatches tells whether live already holds what desired says:
// its labels, its controller reference and its spec.
func serviceMonitorMatches(live, desired *unstructured.Unstructured) bool {
	for k, v := range desired.GetLabels() {
		if live.GetLabels()[k] != v {
			return false
		}
	}
	return apiequality.Semantic.DeepEqual(live.Object["spec"], desired.Object["spec"])
}
