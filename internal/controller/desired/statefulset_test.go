package desired_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

func warm(s *cachev1alpha1.MemcachedSpec) {
	s.Size = ptr.To[int32](3)
	s.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
	s.WarmRestart = &cachev1alpha1.WarmRestartSpec{Enabled: true, LauncherImage: ptr.To("operator:test")}
}

// TestWarmStatefulSet: with warm restarts memcached runs under the
// launcher on a memory file of a memory-backed volume sized to -m, the
// operator rolls the pods (OnDelete), and the pods' template annotation
// names everything but memcached's image.
func TestWarmStatefulSet(t *testing.T) {
	g := NewWithT(t)
	mc, spec := fleettest.NewMemcached(warm)
	set := &appsv1.StatefulSet{}
	g.Expect(fleettest.RoundTrip(desired.StatefulSet(mc, spec), set)).To(Succeed())
	g.Expect(set.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteStatefulSetStrategyType))
	pod := set.Spec.Template.Spec
	g.Expect(pod.InitContainers).To(ConsistOf(And(HaveField("Name", desired.LauncherInstallContainerName), HaveField("Image", "operator:test"),
		HaveField("Command", []string{"/memcached-launcher", "--install=/opt/memcached-operator/memcached-launcher"}))))
	c := pod.Containers[0]
	g.Expect(c.Command).To(Equal([]string{"/opt/memcached-operator/memcached-launcher", "--memory-file=/var/lib/memcached/memory", "--"}))
	g.Expect(c.Args).To(Equal([]string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m", "-e", "/var/lib/memcached/memory"}))
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue(), "the memory file is on its own volume")
	var memory *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "memory-file" {
			memory = &pod.Volumes[i]
		}
	}
	g.Expect(memory).NotTo(BeNil())
	g.Expect(memory.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory))
	g.Expect(memory.EmptyDir.SizeLimit.String()).To(Equal("65Mi"), "-m and its metadata")

	hash := func(mutate func(*cachev1alpha1.MemcachedSpec)) string {
		mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) { warm(s); mutate(s) })
		set := &appsv1.StatefulSet{}
		g.Expect(fleettest.RoundTrip(desired.StatefulSet(mc, spec), set)).To(Succeed())
		return set.Spec.Template.Annotations[desired.TemplateAnnotation]
	}
	same := hash(func(*cachev1alpha1.MemcachedSpec) {})
	g.Expect(same).NotTo(BeEmpty())
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To("memcached:other") })).To(Equal(same), "an image change can be made in place")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](5) })).To(Equal(same), "the size is not the pods'")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.MaxConnections = ptr.To[int32](2048) })).NotTo(Equal(same), "a pod's command line cannot change in place")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.PodLabels = map[string]string{"a": "b"} })).NotTo(Equal(same))

	_, plain := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet) })
	g.Expect(desired.Args(plain)).NotTo(ContainElement("-e"), "no memory file without warm restarts")
}
