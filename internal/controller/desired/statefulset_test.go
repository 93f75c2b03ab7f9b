package desired_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/fleettest"
)

// TestBuildStatefulSet: stable pods are the Deployment's pods, named by
// ordinal under the headless Service, started and stopped in parallel and
// rolled one at a time.
func TestBuildStatefulSet(t *testing.T) {
	g := NewWithT(t)
	mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Size = ptr.To[int32](3)
		s.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
	})
	set := &appsv1.StatefulSet{}
	g.Expect(fleettest.RoundTrip(desired.StatefulSet(mc, spec), set)).To(Succeed())
	dep := &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, spec), dep)).To(Succeed())

	g.Expect(set.Name).To(Equal("cache"))
	g.Expect(*set.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(set.Spec.ServiceName).To(Equal("cache"), "the headless Service gives each pod its DNS name")
	g.Expect(set.Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
	g.Expect(set.Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateStatefulSetStrategyType))
	g.Expect(set.Spec.MinReadySeconds).To(Equal(dep.Spec.MinReadySeconds))
	g.Expect(set.Spec.VolumeClaimTemplates).To(BeEmpty(), "a cache keeps nothing on disk")
	g.Expect(set.Spec.Selector).To(Equal(dep.Spec.Selector))
	g.Expect(set.Labels).To(Equal(dep.Labels))
	g.Expect(set.OwnerReferences).To(Equal(dep.OwnerReferences))
	g.Expect(set.Spec.Template).To(Equal(dep.Spec.Template), "the same pods, whatever runs them")
}

func TestServers(t *testing.T) {
	g := NewWithT(t)
	mc, _ := fleettest.NewMemcached(nil)
	g.Expect(desired.Servers(mc, 11211, []string{"cache-10", "cache-2", "cache-0", "cache-x", "cache-01", "other-1", "cache-", "cache-abc-1"})).To(Equal([]string{
		"cache-0.cache.ns.svc:11211", "cache-2.cache.ns.svc:11211", "cache-10.cache.ns.svc:11211"}), "by ordinal; names that are no ordinal of the fleet left out")
	g.Expect(desired.Servers(mc, 11211, nil)).To(BeEmpty())
}
