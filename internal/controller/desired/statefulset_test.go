package desired_test

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/fleettest"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/test/specgen"
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
// launcher on a memory file of a memory-backed volume sized to -m, its
// command line in an annotation the launcher reads through a downward API
// file, the operator rolls the pods (OnDelete), and the pods' template
// annotation names everything but memcached's image and command line.
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
	g.Expect(c.Command).To(Equal([]string{"/opt/memcached-operator/memcached-launcher", "--memory-file=/var/lib/memcached/memory", "--args-file=/etc/memcached-args/args"}))
	g.Expect(c.Args).To(BeEmpty())
	g.Expect(set.Spec.Template.Annotations).To(HaveKeyWithValue(desired.ArgsAnnotation,
		`["-p","11211","-m","64","-c","1024","-t","4","-I","1m","-e","/var/lib/memcached/memory"]`))
	g.Expect(c.VolumeMounts).To(ContainElement(And(HaveField("Name", "memcached-args"), HaveField("MountPath", "/etc/memcached-args"), HaveField("ReadOnly", true))))
	g.Expect(pod.Volumes).To(ContainElement(And(HaveField("Name", "memcached-args"),
		HaveField("DownwardAPI.Items", ConsistOf(And(HaveField("Path", "args"),
			HaveField("FieldRef.FieldPath", "metadata.annotations['memcached.cache.example.com/args']")))))))
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue(), "the memory file is on its own volume")
	g.Expect(c.StartupProbe).NotTo(BeNil(), "the liveness probe waits for a copy of the cache")
	g.Expect(c.StartupProbe.TCPSocket.Port.String()).To(Equal("memcached"))
	g.Expect(time.Duration(c.StartupProbe.PeriodSeconds*c.StartupProbe.FailureThreshold) * time.Second).To(BeNumerically(">=", time.Hour))
	var memory *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "memory-file" {
			memory = &pod.Volumes[i]
		}
	}
	g.Expect(memory).NotTo(BeNil())
	g.Expect(memory.EmptyDir.Medium).To(Equal(corev1.StorageMediumMemory))
	g.Expect(memory.EmptyDir.SizeLimit.String()).To(Equal("194Mi"), "-m and its metadata, twice, and the pages memcached preallocates: room for a copy")
	g.Expect(pod.InitContainers[0].Resources.Limits.Memory().String()).To(Equal("16Mi"), "no pod limit to raise: memcached has none")

	// With memory limits, the launcher's raises the pod's by one memory file.
	mc, spec = fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		warm(s)
		s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
	})
	g.Expect(fleettest.RoundTrip(desired.StatefulSet(mc, spec), set)).To(Succeed())
	g.Expect(set.Spec.Template.Spec.InitContainers[0].Resources.Limits.Memory().String()).To(Equal("308Mi"), "128Mi, and a copy's room: 115 MiB, its metadata and 64 MiB preallocated")
	g.Expect(set.Spec.Template.Spec.InitContainers[0].Resources.Requests.Memory().String()).To(Equal("8Mi"), "nothing reserved on the node")

	template := func(mutate func(*cachev1alpha1.MemcachedSpec)) map[string]string {
		mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) { warm(s); mutate(s) })
		set := &appsv1.StatefulSet{}
		g.Expect(fleettest.RoundTrip(desired.StatefulSet(mc, spec), set)).To(Succeed())
		return set.Spec.Template.Annotations
	}
	hash := func(mutate func(*cachev1alpha1.MemcachedSpec)) string {
		return template(mutate)[desired.TemplateAnnotation]
	}
	same := hash(func(*cachev1alpha1.MemcachedSpec) {})
	g.Expect(same).NotTo(BeEmpty())
	// The hashes these templates had before in-place resizes: an operator
	// upgrade whose pods match neither replaces every warm pod, and its
	// cache.
	g.Expect(template(func(*cachev1alpha1.MemcachedSpec) {})).To(HaveKeyWithValue(desired.LegacyTemplateAnnotation, warmTemplateHash),
		"an operator upgrade changed the legacy template hash of an unchanged spec")
	g.Expect(template(func(s *cachev1alpha1.MemcachedSpec) {
		s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
		s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "creds"}}
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true), Image: ptr.To("exp:1")}}
	})).To(HaveKeyWithValue(desired.LegacyTemplateAnnotation, "d83bf2ecddd41685"), "the same with limits, auth and the exporter")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To("memcached:other") })).To(Equal(same), "an image change can be made in place")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](5) })).To(Equal(same), "the size is not the pods'")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.MaxConnections = ptr.To[int32](2048) })).To(Equal(same), "a command line change is made in place")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.MemoryLimitMB = ptr.To[int32](128) })).To(Equal(same), "so is a memory change, by a resize")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) {
		s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
	})).To(Equal(same), "and a change of resources")
	g.Expect(template(func(s *cachev1alpha1.MemcachedSpec) { s.MemoryLimitMB = ptr.To[int32](128) })[desired.LegacyTemplateAnnotation]).
		NotTo(Equal(warmTemplateHash), "a pod of an operator before resizes has no room to copy its cache: replaced")
	g.Expect(hash(func(s *cachev1alpha1.MemcachedSpec) { s.PodLabels = map[string]string{"a": "b"} })).NotTo(Equal(same))

	_, plain := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet) })
	g.Expect(desired.Args(plain)).NotTo(ContainElement("-e"), "no memory file without warm restarts")
}

// TestWarmWarningsMatchTheTemplate: for generated pairs of valid warm
// specs, one a mix of the other's fields and a third's, an update whose
// pods' template annotation (which the rollout compares) changes is always
// warned that it replaces the pods: a change said to be made in place, or
// not said to touch the pods, never empties a cache. (The warning may
// speak of a replacement for a change the builder resolves to the same
// pods: an explicit value equal to the one derived.)
func TestWarmWarningsMatchTheTemplate(t *testing.T) {
	g := NewWithT(t)
	r := rand.New(rand.NewPCG(28, 1))
	cfg := policy.Config{DefaultImage: "memcached:test", ExporterImage: "operator:test"}
	warmValid := func(mc *cachev1alpha1.Memcached) bool {
		mc.Name, mc.Namespace = "cache", "ns"
		mc.Spec.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
		mc.Spec.WarmRestart = &cachev1alpha1.WarmRestartSpec{Enabled: true}
		policy.Default(&mc.Spec, cfg)
		errs, _ := policy.ValidateCreate(mc, policy.Limits{MaxSize: 1000})
		return len(errs) == 0 && len(policy.ValidateResolved(policy.Resolve(&mc.Spec, cfg))) == 0
	}
	hash := func(mc *cachev1alpha1.Memcached) string {
		set := &appsv1.StatefulSet{}
		g.Expect(fleettest.RoundTrip(desired.StatefulSet(mc, policy.Resolve(&mc.Spec, cfg)), set)).To(Succeed())
		return set.Spec.Template.Annotations[desired.TemplateAnnotation]
	}
	inPlace, replaced := 0, 0
	for tries := 0; tries < 20000 && (inPlace < 100 || replaced < 100); tries++ {
		old, other := specgen.Random(r, 160), specgen.Random(r, 160)
		if !warmValid(old) {
			continue
		}
		// The new spec takes each field from the other spec with odds of
		// one in six, the port (immutable) never.
		mixed := old.DeepCopy()
		dst, src := reflect.ValueOf(&mixed.Spec).Elem(), reflect.ValueOf(&other.Spec).Elem()
		for i := range dst.NumField() {
			if dst.Type().Field(i).Name != "Port" && r.IntN(6) == 0 {
				dst.Field(i).Set(src.Field(i))
			}
		}
		if !warmValid(mixed) {
			continue
		}
		_, warnings := policy.ValidateUpdate(old, mixed, policy.Limits{MaxSize: 1000})
		inPlaceSaid := slices.ContainsFunc(warnings, func(w string) bool {
			return w == policy.WarmRestartWarning || w == policy.WarmResizeWarning || strings.HasPrefix(w, policy.WarmColdWarning)
		})
		replacedSaid := slices.Contains(warnings, policy.RestartWarning)
		if hash(old) != hash(mixed) {
			g.Expect(replacedSaid).To(BeTrue(), "pods replaced, but the warnings %q say otherwise for\nold %+v\nnew %+v", warnings, old.Spec, mixed.Spec)
			replaced++
		} else if inPlaceSaid {
			inPlace++
		}
	}
	g.Expect(inPlace).To(BeNumerically(">=", 50), "changes made in place drawn")
	g.Expect(replaced).To(BeNumerically(">=", 50), "changes that replace pods drawn")
}

// warmTemplateHash is the template hash of fleettest's warm fleet, as written
// by the operator since warm restarts shipped.
const warmTemplateHash = "a1cc2b41b01b547c"

// TestNoArchitectureConstraint: the operator's images are built for amd64
// and arm64 (make image), so a fleet's pods, under either workload, are tied
// to an architecture only when the spec asks for it, whatever else it says.
func TestNoArchitectureConstraint(t *testing.T) {
	g := NewWithT(t)
	r := rand.New(rand.NewPCG(30, 1))
	cfg := policy.Config{DefaultImage: "memcached:test", ExporterImage: "operator:test"}
	built := 0
	for tries := 0; tries < 5000 && built < 300; tries++ {
		mc := specgen.Random(r, 160)
		mc.Name, mc.Namespace = "cache", "ns"
		policy.Default(&mc.Spec, cfg)
		if errs, _ := policy.ValidateCreate(mc, policy.Limits{MaxSize: 1000}); len(errs) > 0 {
			continue
		}
		spec := policy.Resolve(&mc.Spec, cfg)
		if len(policy.ValidateResolved(spec)) > 0 {
			continue
		}
		asked, err := json.Marshal(mc.Spec)
		g.Expect(err).NotTo(HaveOccurred())
		if strings.Contains(string(asked), "kubernetes.io/arch") {
			continue
		}
		for _, w := range []any{desired.Deployment(mc, spec), desired.StatefulSet(mc, spec)} {
			raw, err := json.Marshal(w)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(raw)).NotTo(ContainSubstring("kubernetes.io/arch"), "for %+v", mc.Spec)
		}
		built++
	}
	g.Expect(built).To(BeNumerically(">=", 300), "too few valid specs drawn")
}
