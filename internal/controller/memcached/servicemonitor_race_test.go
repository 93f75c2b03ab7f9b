package memcached

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/policy"
)

// TestServiceMonitorRemovedBeforeItsConditionIsSeen: monitoring is turned
// off in the pass right after the one that created the ServiceMonitor, and
// that pass reads the fleet without the ServiceMonitorReady condition (the
// status write has not reached the cache yet). The ServiceMonitor must go
// all the same.
func TestServiceMonitorRemovedBeforeItsConditionIsSeen(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(desired.ServiceMonitorGVK, meta.RESTScopeNamespace)
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 2}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(mc).Build()
	r := &Reconciler{Client: c}
	ctx := context.Background()
	cfg := policy.Config{DefaultImage: "memcached:test", ExporterImage: "op:1"}

	on := mc.DeepCopy()
	on.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{
		Exporter:       &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)},
		ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Enabled: ptr.To(true)},
	}
	g.Expect(r.reconcileServiceMonitor(ctx, &scope{memcached: on, spec: policy.Resolve(&on.Spec, cfg)})).To(Succeed())
	sm := &unstructured.Unstructured{}
	sm.SetGroupVersionKind(desired.ServiceMonitorGVK)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(mc), sm)).To(Succeed())

	off := mc.DeepCopy() // no ServiceMonitorReady condition in its status
	off.Generation = 3
	s := &scope{memcached: off, spec: policy.Resolve(&off.Spec, cfg)}
	g.Expect(r.reconcileServiceMonitor(ctx, s)).To(Succeed())
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(mc), sm))).To(BeTrue(), "the ServiceMonitor is deleted")
	g.Expect(s.monitoring.Removed).To(BeTrue())

	// Once removed, a fleet that never asks again costs no read.
	s = &scope{memcached: off, spec: policy.Resolve(&off.Spec, cfg)}
	g.Expect(r.reconcileServiceMonitor(ctx, s)).To(Succeed())
	g.Expect(s.monitoring).To(BeNil())
}
