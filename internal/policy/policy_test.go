package policy_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

var cfg = policy.Config{DefaultImage: "memcached:test"}

func limits(mem, cpu string) *corev1.ResourceRequirements {
	r := &corev1.ResourceRequirements{Limits: corev1.ResourceList{}}
	if mem != "" {
		r.Limits[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	if cpu != "" {
		r.Limits[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	return r
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name  string
		in    cachev1alpha1.MemcachedSpec
		check func(g Gomega, s cachev1alpha1.MemcachedSpec)
	}{{
		name: "empty spec gets every default",
		check: func(g Gomega, s cachev1alpha1.MemcachedSpec) {
			g.Expect(*s.Size).To(Equal(int32(1)))
			g.Expect(*s.Image).To(Equal("memcached:test"))
			g.Expect(*s.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
			g.Expect(*s.Port).To(Equal(int32(11211)))
			g.Expect(s.MemoryLimitMB).To(BeNil(), "derived at build time, never stored")
			g.Expect(*s.MaxConnections).To(Equal(int32(1024)))
			g.Expect(s.Threads).To(BeNil(), "derived at build time, never stored")
			g.Expect(*s.MaxItemSize).To(Equal("1m"))
			g.Expect(*s.Verbosity).To(BeZero())
		},
	}, {
		name: "user values are kept, size 0 included",
		in:   cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](0), Image: ptr.To("mine"), Port: ptr.To[int32](1234), MemoryLimitMB: ptr.To[int32](10)},
		check: func(g Gomega, s cachev1alpha1.MemcachedSpec) {
			g.Expect(*s.Size).To(BeZero())
			g.Expect(*s.Image).To(Equal("mine"))
			g.Expect(*s.Port).To(Equal(int32(1234)))
			g.Expect(*s.MemoryLimitMB).To(Equal(int32(10)))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := *tt.in.DeepCopy()
			policy.Default(&spec, cfg)
			tt.check(g, spec)
			again := *spec.DeepCopy()
			policy.Default(&again, cfg)
			g.Expect(again).To(Equal(spec), "defaulting must be idempotent")
		})
	}
}

func TestAppArmorProfileIsPinnedWhenTheOperatorSetsOne(t *testing.T) {
	g := NewWithT(t)
	spec := cachev1alpha1.MemcachedSpec{}
	policy.DefaultCreate(&spec, cfg)
	g.Expect(spec.AppArmorProfile).To(BeNil(), "none by default: nodes without AppArmor refuse the pods")
	withProfile := cfg
	withProfile.AppArmorProfile = corev1.AppArmorProfileTypeRuntimeDefault
	old := cachev1alpha1.MemcachedSpec{}
	policy.Default(&old, withProfile)
	g.Expect(old.AppArmorProfile).To(BeNil(), "an update of a fleet created without one: pinning it would roll its pods")
	g.Expect(policy.Resolve(&old, withProfile).AppArmorProfile).To(BeNil(), "nor does the controller add it")
	policy.DefaultCreate(&spec, withProfile)
	g.Expect(spec.AppArmorProfile).To(Equal(ptr.To(corev1.AppArmorProfileTypeRuntimeDefault)), "a new fleet gets it")
}

func TestExporterImageIsPinnedOnlyWhenEnabled(t *testing.T) {
	g := NewWithT(t)
	withExporter := policy.Config{DefaultImage: "memcached:test", ExporterImage: "operator:1"}
	spec := cachev1alpha1.MemcachedSpec{Monitoring: &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{}}}
	policy.Default(&spec, withExporter)
	g.Expect(spec.Monitoring.Exporter.Image).To(BeNil(), "nothing to pin while the exporter is off")
	spec.Monitoring.Exporter.Enabled = ptr.To(true)
	policy.Default(&spec, withExporter)
	g.Expect(*spec.Monitoring.Exporter.Image).To(Equal("operator:1"))
	policy.Default(&spec, policy.Config{ExporterImage: "operator:2"})
	g.Expect(*spec.Monitoring.Exporter.Image).To(Equal("operator:1"), "an operator upgrade does not change a pinned image")
	g.Expect(policy.Resolve(&spec, withExporter).Monitoring.Exporter.Resources.Limits.Memory().String()).To(Equal("32Mi"))

	unpinned := cachev1alpha1.MemcachedSpec{Image: ptr.To("m"), Monitoring: &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}}
	g.Expect(paths(policy.ValidateResolved(policy.Resolve(&unpinned, policy.Config{})))).To(ConsistOf("spec.monitoring.exporter.image"))
}

func TestAuthDefaults(t *testing.T) {
	g := NewWithT(t)
	withOperator := policy.Config{DefaultImage: "memcached:test", ExporterImage: "operator:1"}
	spec := cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "s"}}}
	policy.Default(&spec, withOperator)
	g.Expect(*spec.Auth.SecretRef.Key).To(Equal("auth"))
	g.Expect(*spec.Auth.ReloaderImage).To(Equal("operator:1"), "the operator image holds the reloader")
	policy.Default(&spec, policy.Config{ExporterImage: "operator:2"})
	g.Expect(*spec.Auth.ReloaderImage).To(Equal("operator:1"), "an operator upgrade does not change a pinned image")

	custom := cachev1alpha1.MemcachedSpec{Auth: &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "s", Key: ptr.To("users")}}}
	policy.Default(&custom, withOperator)
	g.Expect(*custom.Auth.SecretRef.Key).To(Equal("users"), "a user's key is kept")

	unpinned := cachev1alpha1.MemcachedSpec{Image: ptr.To("m"), Auth: &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "s"}}}
	g.Expect(paths(policy.ValidateResolved(policy.Resolve(&unpinned, policy.Config{})))).To(ConsistOf("spec.auth.reloaderImage"))
}

func TestTLSDefaults(t *testing.T) {
	g := NewWithT(t)
	withOperator := policy.Config{DefaultImage: "memcached:test", ExporterImage: "operator:1"}
	spec := cachev1alpha1.MemcachedSpec{TLS: &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}}}
	policy.Default(&spec, withOperator)
	g.Expect(*spec.TLS.ClientAuth).To(Equal(cachev1alpha1.TLSClientAuthNone))
	g.Expect(*spec.TLS.IssuerRef.Kind).To(Equal("Issuer"))
	g.Expect(*spec.TLS.IssuerRef.Group).To(Equal("cert-manager.io"))
	g.Expect(*spec.TLS.ReloaderImage).To(Equal("operator:1"), "the operator image holds the reloader")
	g.Expect(spec.TLS.PlaintextPort).To(BeNil(), "no listener without TLS unless asked")
	policy.Default(&spec, policy.Config{ExporterImage: "operator:2"})
	g.Expect(*spec.TLS.ReloaderImage).To(Equal("operator:1"), "an operator upgrade does not change a pinned image")

	unpinned := cachev1alpha1.MemcachedSpec{Image: ptr.To("m"), TLS: &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}}}
	g.Expect(paths(policy.ValidateResolved(policy.Resolve(&unpinned, policy.Config{})))).To(ConsistOf("spec.tls.reloaderImage"))
	unpinned.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "s"}, ReloaderImage: ptr.To("r")}
	g.Expect(policy.ValidateResolved(policy.Resolve(&unpinned, policy.Config{}))).To(BeEmpty(), "with auth, its reloader image runs the one sidecar")
	g.Expect(policy.ReloaderImage(&unpinned)).To(Equal("r"))
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name            string
		in              cachev1alpha1.MemcachedSpec
		memory, threads int32
	}{
		{name: "no limits: memcached's own defaults", memory: 64, threads: 4},
		{name: "memory and threads derive from the container limits", in: cachev1alpha1.MemcachedSpec{Resources: limits("1Gi", "1500m")}, memory: 921, threads: 2},
		{name: "a tiny memory limit still leaves memcached its minimum", in: cachev1alpha1.MemcachedSpec{Resources: limits("4Mi", "")}, memory: 8, threads: 4},
		{name: "user values win", in: cachev1alpha1.MemcachedSpec{Resources: limits("1Gi", "8"), MemoryLimitMB: ptr.To[int32](100), Threads: ptr.To[int32](2)}, memory: 100, threads: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			in := tt.in.DeepCopy()
			out := policy.Resolve(in, cfg)
			g.Expect(*out.MemoryLimitMB).To(Equal(tt.memory))
			g.Expect(*out.Threads).To(Equal(tt.threads))
			g.Expect(*out.Image).To(Equal("memcached:test"))
			g.Expect(*in).To(Equal(tt.in), "Resolve works on a copy")
		})
	}
}

func TestDerivedMemoryFollowsTheLimit(t *testing.T) {
	g := NewWithT(t)
	// Created with a 256Mi limit and no memoryLimitMB: nothing derived is stored.
	old := defaulted(func(s *cachev1alpha1.MemcachedSpec) { s.Resources = limits("256Mi", "") })
	g.Expect(old.Spec.MemoryLimitMB).To(BeNil())
	g.Expect(*policy.Resolve(&old.Spec, cfg).MemoryLimitMB).To(Equal(int32(230)))
	for _, mem := range []string{"128Mi", "1Gi"} {
		mc := old.DeepCopy()
		mc.Spec.Resources = limits(mem, "")
		errs, _ := policy.ValidateUpdate(old, mc, policy.Limits{MaxSize: 10})
		g.Expect(errs).To(BeEmpty(), "changing the memory limit to %s", mem)
	}
	lowered := old.DeepCopy()
	lowered.Spec.Resources = limits("128Mi", "")
	g.Expect(*policy.Resolve(&lowered.Spec, cfg).MemoryLimitMB).To(Equal(int32(115)), "-m follows the new limit")

	// A memoryLimitMB the user wrote is held to the limit, on that field.
	set := old.DeepCopy()
	set.Spec.MemoryLimitMB = ptr.To[int32](200)
	tooSmall := set.DeepCopy()
	tooSmall.Spec.Resources = limits("128Mi", "")
	errs, _ := policy.ValidateUpdate(set, tooSmall, policy.Limits{MaxSize: 10})
	g.Expect(paths(errs)).To(ConsistOf("spec.memoryLimitMB"))
}

func paths(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return out
}

func defaulted(mutate func(*cachev1alpha1.MemcachedSpec)) *cachev1alpha1.Memcached {
	mc := &cachev1alpha1.Memcached{Spec: cachev1alpha1.MemcachedSpec{Resources: limits("128Mi", "")}}
	mc.Name = "mc"
	if mutate != nil {
		mutate(&mc.Spec)
	}
	policy.Default(&mc.Spec, cfg)
	return mc
}

func TestValidateCreate(t *testing.T) {
	lim := policy.Limits{MaxSize: 10}
	tests := []struct {
		name     string
		mcName   string
		mutate   func(*cachev1alpha1.MemcachedSpec)
		errPaths []string
		warning  string
	}{
		{name: "defaults are valid"},
		{name: "negative size", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](-1) }, errPaths: []string{"spec.size"}},
		{name: "size above --max-size", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](11) }, errPaths: []string{"spec.size"}},
		{name: "size at --max-size", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](10) }},
		{name: "size 0 warns", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](0) }, warning: "spec.size is 0"},
		{name: "no memory limit warns", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Resources = nil }, warning: "limits.memory is not set"},
		{name: "blank image", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To(" ") }, errPaths: []string{"spec.image"}},
		{name: "image with a trailing space", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To("memcached:1.6 ") }, errPaths: []string{"spec.image"}},
		{name: "memory above the container limit", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MemoryLimitMB = ptr.To[int32](200) }, errPaths: []string{"spec.memoryLimitMB"}},
		{name: "a memory limit too small for the derived minimum", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Resources = limits("4Mi", "") },
			errPaths: []string{"spec.resources.limits.memory"}},
		{name: "item size above half the memory", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.MemoryLimitMB, s.MaxItemSize = ptr.To[int32](64), ptr.To("33m")
		}, errPaths: []string{"spec.maxItemSize"}},
		{name: "item size above half the derived memory", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = ptr.To("64m") }, errPaths: []string{"spec.maxItemSize"}},
		{name: "item size below 1k", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = ptr.To("512") }, errPaths: []string{"spec.maxItemSize"}},
		{name: "item size unparsable", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = ptr.To("1g") }, errPaths: []string{"spec.maxItemSize"}},
		{name: "extra args that fields own or that break the container", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			// getopt reads "--port=1" as -m's value, as memcached would.
			s.ExtraArgs = []string{"-o", "modern", "-m", "--port=1", "-d"}
		}, errPaths: []string{"spec.extraArgs[2]", "spec.extraArgs[4]"}},
		{name: "values memcached refuses, for options that take a word or a number", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.ExtraArgs = []string{"-B", "--listen-backlog=512", "-R0", "-f", "1", "-b", "x", "-D", "::", "-n", "-3"}
		}, errPaths: []string{"spec.extraArgs[0]", "spec.extraArgs[2]", "spec.extraArgs[3]", "spec.extraArgs[5]", "spec.extraArgs[7]", "spec.extraArgs[9]"}},
		{name: "-o sub-options memcached does not have, extstore's, and slab_chunk_max", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.ExtraArgs = []string{"-o", "ascii", "-o", "modern,-C", "-o", "ext_item_size=512", "-o", "slab_chunk_max=1"}
		}, errPaths: []string{"spec.extraArgs[0]", "spec.extraArgs[2]", "spec.extraArgs[4]", "spec.extraArgs[6]"}},
		{name: "the binary protocol with ASCII auth, in both spellings", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}}
			s.ExtraArgs = []string{"-B", "binary", "--protocol=auto"}
		}, errPaths: []string{"spec.extraArgs[0]", "spec.extraArgs[2]"}},
		{name: "ASCII auth with -B ascii", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}}
			s.ExtraArgs = []string{"-Bascii"}
		}},
		{name: "fewer connections than memcached needs for its threads", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Threads, s.MaxConnections = ptr.To[int32](16), ptr.To[int32](95)
		}, errPaths: []string{"spec.maxConnections"}},
		{name: "fewer connections than the threads derived from the CPU limit need", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.MaxConnections = ptr.To[int32](100)
			s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		}, errPaths: []string{"spec.maxConnections"}},
		{name: "just enough connections", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Threads, s.MaxConnections = ptr.To[int32](16), ptr.To[int32](96)
		}},
		{name: "an item size memcached's 512k slab chunks do not divide", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = ptr.To("768k") },
			errPaths: []string{"spec.maxItemSize"}},
		{name: "an item size below a slab chunk", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = ptr.To("64k") },
			errPaths: []string{"spec.maxItemSize"}},
		{name: "the exporter's port, for memcached or its plain-text listener", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
			s.Port = ptr.To[int32](9150)
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}, PlaintextPort: ptr.To[int32](9150)}
		}, errPaths: []string{"spec.port", "spec.tls.plaintextPort", "spec.tls.plaintextPort"}},
		{name: "port 9150 without the exporter", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Port = ptr.To[int32](9150) }},
		{name: "a spec larger than 64 KiB as JSON, through affinity terms the schema cannot bound", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			term := corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": strings.Repeat("a", 63)}}}
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
			for range 1000 {
				s.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(s.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term)
			}
		}, errPaths: []string{"spec"}},
		{name: "allowed extra args", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.ExtraArgs = []string{"-o", "modern,maxconns_fast", "--disable-cas", "-MF", "-R20", "--listen-backlog", "512", "-B", "ascii", "--slab-g=1.1"}
		}},
		{name: "reserved pod label", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodLabels = map[string]string{"app.kubernetes.io/instance": "x", "team": "a"}
		}, errPaths: []string{"spec.podLabels[app.kubernetes.io/instance]"}},
		{name: "invalid label key and value", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodLabels = map[string]string{"bad key": "x", "team": "-nope-"}
		}, errPaths: []string{"spec.podLabels", "spec.podLabels"}},
		{name: "invalid annotation key", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.PodAnnotations = map[string]string{"a/b/c": "x"} },
			errPaths: []string{"spec.podAnnotations"}},
		{name: "annotations that would weaken the restricted profile or steer the scale-down, in every spelling", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodAnnotations = map[string]string{
				"container.apparmor.security.beta.kubernetes.io/memcached": "unconfined",
				"seccomp.security.alpha.kubernetes.io/pod":                 "unconfined",
				"Container.Seccomp.Security.Alpha.Kubernetes.IO/memcached": "unconfined",
				"controller.kubernetes.io/pod-deletion-cost":               "-1",
				"kubernetes.io/psp": "privileged",
				"example.k8s.io/x":  "y",
			}
		}, errPaths: []string{"spec.podAnnotations[Container.Seccomp.Security.Alpha.Kubernetes.IO/memcached]",
			"spec.podAnnotations[container.apparmor.security.beta.kubernetes.io/memcached]", "spec.podAnnotations[controller.kubernetes.io/pod-deletion-cost]",
			"spec.podAnnotations[example.k8s.io/x]", "spec.podAnnotations[kubernetes.io/psp]", "spec.podAnnotations[seccomp.security.alpha.kubernetes.io/pod]"}},
		{name: "annotations the operator writes on its pods, in every spelling", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodAnnotations = map[string]string{
				"memcached.cache.example.com/args":         `["-m","1"]`,
				"Memcached.Cache.Example.COM/pod-template": "x",
				"cache.example.com/restarts":               "0",
				"other.cache.example.com/x":                "y",
			}
		}, errPaths: []string{"spec.podAnnotations[Memcached.Cache.Example.COM/pod-template]", "spec.podAnnotations[cache.example.com/restarts]",
			"spec.podAnnotations[memcached.cache.example.com/args]", "spec.podAnnotations[other.cache.example.com/x]"}},
		{name: "Service labels that would take the operator's or Kubernetes' own, in every spelling", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Service = &cachev1alpha1.ServiceSpec{Labels: map[string]string{
				"app.kubernetes.io/managed-by": "me", "kubernetes.io/service-name": "x", "Service.Kubernetes.IO/service-proxy-name": "none",
				"endpointslice.kubernetes.io/managed-by": "me", "team": "web", "example.com/owner": "a",
			}}
		}, errPaths: []string{"spec.service.labels[app.kubernetes.io/managed-by]", "spec.service.labels[kubernetes.io/service-name]",
			"spec.service.labels[Service.Kubernetes.IO/service-proxy-name]", "spec.service.labels[endpointslice.kubernetes.io/managed-by]",
			"spec.service.labels"}},
		{name: "invalid Service label value and annotation key", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Service = &cachev1alpha1.ServiceSpec{Labels: map[string]string{"team": "a b"}, Annotations: map[string]string{"a/b/c": "x"}}
		}, errPaths: []string{"spec.service.labels", "spec.service.annotations"}},
		{name: "Service annotations, Kubernetes' prefixes included (external-dns reads one)", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Service = &cachev1alpha1.ServiceSpec{Annotations: map[string]string{"external-dns.alpha.kubernetes.io/hostname": "cache.example.org", "note": "anything"}}
		}},
		{name: "allowed annotations, reserved or not", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodAnnotations = map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true", "kubectl.kubernetes.io/default-container": "memcached",
				"prometheus.io/scrape": "true", "notkubernetes.io/x": "y", "plain": "z", "notcache.example.com/x": "y"}
		}},
		{name: "invalid nodeSelector", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.NodeSelector = map[string]string{"pool": "a b"} },
			errPaths: []string{"spec.nodeSelector"}},
		{name: "PDB bounds that are no number or percentage", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("lots"))}
		}, errPaths: []string{"spec.podDisruptionBudget.minAvailable"}},
		{name: "PDB percentage above 100", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("150%"))}
		}, errPaths: []string{"spec.podDisruptionBudget.maxUnavailable"}},
		{name: "negative PDB bound", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(-1))}
		}, errPaths: []string{"spec.podDisruptionBudget.maxUnavailable"}},
		{name: "toleration with a value under Exists", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}
		}, errPaths: []string{"spec.tolerations[0].value"}},
		{name: "spread constraint without a key or skew", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{WhenUnsatisfiable: corev1.DoNotSchedule}}
		}, errPaths: []string{"spec.topologySpreadConstraints[0].maxSkew", "spec.topologySpreadConstraints[0].topologyKey"}},
		{name: "requests above limits", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}, errPaths: []string{"spec.resources.requests[memory]"}},
		{name: "a name that is not a DNS-1035 label", mcName: "cache.v2", errPaths: []string{"metadata.name"}},
		{name: "a name that starts with a digit", mcName: "1cache", errPaths: []string{"metadata.name"}},
		{name: "a name longer than 63 characters", mcName: strings.Repeat("a", 64), errPaths: []string{"metadata.name"}},
		{name: "a ServiceMonitor without the exporter", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Monitoring = &cachev1alpha1.MonitoringSpec{ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Enabled: ptr.To(true)}}
		}, errPaths: []string{"spec.monitoring.serviceMonitor.enabled"}},
		{name: "monitoring with the exporter and a ServiceMonitor", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true), Image: ptr.To("op:1")},
				ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Enabled: ptr.To(true), Interval: ptr.To("30s"), Labels: map[string]string{"release": "prom"}}}
		}},
		{name: "invalid ServiceMonitor labels", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Monitoring = &cachev1alpha1.MonitoringSpec{ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Labels: map[string]string{"bad key": "x"}}}
		}, errPaths: []string{"spec.monitoring.serviceMonitor.labels"}},
		{name: "network policy peers of every valid shape", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true), From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}}},
				{NamespaceSelector: &metav1.LabelSelector{}},
				{PodSelector: &metav1.LabelSelector{}, NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/8"}},
			}, MetricsFrom: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}}
		}},
		{name: "network policy peers the API server refuses", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{From: []networkingv1.NetworkPolicyPeer{
				{},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.1/8"}},
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.0.0/16", "10.2.0.0/24", "bad"}}},
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key": "x"}}},
			}, MetricsFrom: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}},
				{IPBlock: &networkingv1.IPBlock{}},
			}}
		}, errPaths: []string{"spec.networkPolicy.from[0]", "spec.networkPolicy.from[1]", "spec.networkPolicy.from[2].ipBlock.cidr",
			"spec.networkPolicy.from[3].ipBlock.except[0]", "spec.networkPolicy.from[3].ipBlock.except[1]", "spec.networkPolicy.from[3].ipBlock.except[2]",
			"spec.networkPolicy.from[4].podSelector.matchLabels", "spec.networkPolicy.metricsFrom[0].namespaceSelector.matchExpressions[0].values",
			"spec.networkPolicy.metricsFrom[1].ipBlock.cidr"}},
		{name: "auth from a Secret's default key", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "memcached-auth"}}
		}},
		{name: "auth from a dotted Secret name and key", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "cache.auth-v2", Key: ptr.To("users_v2.txt")}, ReloaderImage: ptr.To("reloader:1")}
		}},
		{name: "auth Secret names and keys the API server refuses", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "Bad_Name", Key: ptr.To("../auth")}, ReloaderImage: ptr.To(" reloader ")}
		}, errPaths: []string{"spec.auth.secretRef.name", "spec.auth.secretRef.key", "spec.auth.reloaderImage"}},
		{name: "auth with an empty Secret name and a key with a slash", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Key: ptr.To("a/b")}}
		}, errPaths: []string{"spec.auth.secretRef.name", "spec.auth.secretRef.key"}},
		{name: "TLS from a namespace Issuer with defaults", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}}
		}},
		{name: "TLS from a ClusterIssuer of an external group, client certificates required, a plaintext port", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "corp.ca", Kind: ptr.To("ClusterIssuer"), Group: ptr.To("awspca.cert-manager.io")},
				ClientAuth: ptr.To(cachev1alpha1.TLSClientAuthRequire), PlaintextPort: ptr.To[int32](11311), ReloaderImage: ptr.To("reloader:1")}
		}},
		{name: "TLS disabled needs no issuer", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{}
		}},
		{name: "TLS enabled without an issuer", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true}
		}, errPaths: []string{"spec.tls.issuerRef"}},
		{name: "TLS issuer and modes cert-manager and memcached refuse", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "Bad_Name", Kind: ptr.To("Cluster"), Group: ptr.To("Bad_Group")},
				ClientAuth: ptr.To(cachev1alpha1.TLSClientAuth("Maybe")), PlaintextPort: ptr.To[int32](0), ReloaderImage: ptr.To(" r ")}
		}, errPaths: []string{"spec.tls.issuerRef.name", "spec.tls.issuerRef.kind", "spec.tls.issuerRef.group", "spec.tls.clientAuth", "spec.tls.plaintextPort", "spec.tls.reloaderImage"}},
		{name: "TLS plaintext port on the TLS port", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}, PlaintextPort: ptr.To[int32](11211)}
		}, errPaths: []string{"spec.tls.plaintextPort"}},
		{name: "TLS plaintext port above 65535", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}, PlaintextPort: ptr.To[int32](65536)}
		}, errPaths: []string{"spec.tls.plaintextPort"}},
		{name: "TLS plaintext port on the loopback listener", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}, PlaintextPort: ptr.To[int32](11299)}
		}, errPaths: []string{"spec.tls.plaintextPort"}},
		{name: "TLS on the loopback listener's port", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Port = ptr.To[int32](11299)
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}}
		}, errPaths: []string{"spec.tls.enabled"}},
		{name: "TLS through extraArgs instead of spec.tls", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.ExtraArgs = []string{"-Z", "-o", "ssl_chain_cert=/x"}
		}, errPaths: []string{"spec.extraArgs[0]", "spec.extraArgs[1]"}},
		{name: "auth file given through extraArgs instead of spec.auth", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.ExtraArgs = []string{"-Y", "/etc/passwd"}
		}, errPaths: []string{"spec.extraArgs[0]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc := defaulted(tt.mutate)
			if tt.mcName != "" {
				mc.Name = tt.mcName
			}
			errs, warnings := policy.ValidateCreate(mc, lim)
			if tt.errPaths == nil {
				g.Expect(errs).To(BeEmpty())
			} else {
				g.Expect(paths(errs)).To(ConsistOf(tt.errPaths))
			}
			if tt.warning != "" {
				g.Expect(warnings).To(ContainElement(ContainSubstring(tt.warning)))
			}
		})
	}
}

// TestValidateUndefaulted judges a spec as the controller meets it when no
// defaulting webhook ran: the rules hold with the values Resolve fills in.
func TestValidateUndefaulted(t *testing.T) {
	g := NewWithT(t)
	mc := &cachev1alpha1.Memcached{Spec: cachev1alpha1.MemcachedSpec{
		TLS: &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}, PlaintextPort: ptr.To(policy.DefaultPort)},
	}}
	mc.Name = "mc"
	g.Expect(paths(policy.Validate(mc))).To(ConsistOf("spec.tls.plaintextPort"), "the plain-text listener on the default port, which spec.port left empty gets")
}

// TestExtraArgsBypasses holds every spelling of an owned or fatal option
// that memcached's getopt_long would read, each rejected at its index.
func TestExtraArgsBypasses(t *testing.T) {
	for _, args := range [][]string{
		{"-m2048"}, {"-m 2048"}, {"-m", "2048"}, {"--memory-limit=4096"}, {"--memory-limit", "4096"}, {"--memory-l=1"},
		{"-vd"}, {"-dv"}, {"-Mv"}, {"-Md"}, {"-v"}, {"-vvv"}, {"--verbose"},
		{"--port=1"}, {"--port", "1"}, {"--po=1"}, {"-p1"}, {"-c1"}, {"--conn=1"}, {"-t", "2"}, {"--thr=2"}, {"-I2m"}, {"--max-item=2m"},
		{"--daemon"}, {"--da"}, {"-d"}, {"-u", "root"}, {"-uroot"}, {"--user=root"},
		{"-l", "127.0.0.1"}, {"--listen=127.0.0.1"}, {"-s/tmp/sock"}, {"-U", "11211"}, {"-A"}, {"-h"}, {"-V"},
		{"-Z"}, {"-o", "ssl_chain_cert=/x"}, {"-o", "modern,ext_path=/x:1G"},
		{"--mem=1"},                                           // ambiguous: --memory-limit, --memory-file
		{"--nope"}, {"-q"}, {"modern"}, {"-"}, {"--"}, {"-R"}, // unknown, positional, missing value
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			g := NewWithT(t)
			mc := defaulted(func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = append([]string{"-C"}, args...) })
			errs, _ := policy.ValidateCreate(mc, policy.Limits{})
			g.Expect(errs).NotTo(BeEmpty())
			for _, p := range paths(errs) {
				g.Expect(p).To(HavePrefix("spec.extraArgs["))
				g.Expect(p).NotTo(Equal("spec.extraArgs[0]"), "-C is allowed; the error is on the offending argument")
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	lim := policy.Limits{MaxSize: 10}
	tests := []struct {
		name     string
		old, new func(*cachev1alpha1.MemcachedSpec)
		errPaths []string
		warnings []string
	}{
		{name: "resize within bounds", new: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](5) }},
		{name: "size above a lowered --max-size is kept while unchanged",
			old: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](20) },
			new: func(s *cachev1alpha1.MemcachedSpec) {
				s.Size = ptr.To[int32](20)
				s.MaxConnections = ptr.To[int32](1000)
			}, warnings: []string{policy.RestartWarning}},
		{name: "size above --max-size cannot grow",
			old: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](20) },
			new: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](21) }, errPaths: []string{"spec.size"}},
		{name: "size above --max-size may move down",
			old: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](50) },
			new: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](40) }},
		{name: "image change warns that pods restart", new: func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To("memcached:2") }, warnings: []string{policy.RestartWarning}},
		{name: "a value stored before a rule tightened does not block other edits",
			old: func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-L"} },
			new: func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-L"}; s.Size = ptr.To[int32](3) }},
		{name: "but a new bad value in the same place is judged",
			old: func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-L"} },
			new: func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-k"} }, errPaths: []string{"spec.extraArgs[0]"}, warnings: []string{policy.RestartWarning}},
		{name: "size warnings only when size changes",
			old: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](1); s.Resources = nil },
			new: func(s *cachev1alpha1.MemcachedSpec) {
				s.Size = ptr.To[int32](1)
				s.Resources = nil
				s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)}
			}},
		{name: "size 1 warns when it becomes 1", new: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](1) },
			old: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) }, warnings: []string{"spec.size is 1: every restart or node drain empties the whole cache"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			errs, warnings := policy.ValidateUpdate(defaulted(tt.old), defaulted(tt.new), lim)
			g.Expect(paths(errs)).To(ConsistOf(tt.errPaths))
			g.Expect(warnings).To(ConsistOf(tt.warnings))
		})
	}
}

// TestWarmUpdateWarnings: a fleet with warm restarts is told which changes
// restart memcached in place with its cache, which in place without it (a
// setting its memory file was made with, in any spelling), and which
// replace its pods.
func TestWarmUpdateWarnings(t *testing.T) {
	warm := func(more func(*cachev1alpha1.MemcachedSpec)) func(*cachev1alpha1.MemcachedSpec) {
		return func(s *cachev1alpha1.MemcachedSpec) {
			s.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
			s.WarmRestart = &cachev1alpha1.WarmRestartSpec{Enabled: true, LauncherImage: ptr.To("operator:1")}
			s.ExtraArgs = []string{"-o", "lru_crawler"}
			if more != nil {
				more(s)
			}
		}
	}
	cold := func(what string) string {
		return policy.WarmColdWarning + what + "; " + policy.WarmCopyNote
	}
	for _, tt := range []struct {
		name string
		new  func(*cachev1alpha1.MemcachedSpec)
		want string
	}{
		{"image", func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To("memcached:2") }, policy.WarmRestartWarning},
		{"maxConnections", func(s *cachev1alpha1.MemcachedSpec) { s.MaxConnections = ptr.To[int32](4096) }, policy.WarmRestartWarning},
		{"threads and verbosity", func(s *cachev1alpha1.MemcachedSpec) { s.Threads = ptr.To[int32](2); s.Verbosity = ptr.To[int32](1) }, policy.WarmRestartWarning},
		{"an extraArgs option memcached restores under", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-R", "40"} }, policy.WarmRestartWarning},
		{"maxItemSize", func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = ptr.To("2m") }, cold("maxItemSize")},
		{"-C", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = append(s.ExtraArgs, "-C") }, cold("extraArgs -C")},
		{"--disable-cas", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = append(s.ExtraArgs, "--disable-cas") }, cold("extraArgs -C")},
		{"--disable-c, a prefix", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = append(s.ExtraArgs, "--disable-c") }, cold("extraArgs -C")},
		{"clustered -MC", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = append(s.ExtraArgs, "-MC") }, cold("extraArgs -C")},
		{"-f1.5 attached", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = append(s.ExtraArgs, "-f1.5") }, cold("extraArgs -f")},
		{"--slab-min-size=64", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = append(s.ExtraArgs, "--slab-min-size=64") }, cold("extraArgs -n")},
		{"-o slab_chunk_max among others", func(s *cachev1alpha1.MemcachedSpec) {
			s.ExtraArgs = []string{"-o", "lru_crawler,slab_chunk_max=262144"}
		}, cold("extraArgs -o slab_chunk_max")},
		{"two at once", func(s *cachev1alpha1.MemcachedSpec) {
			s.MaxItemSize = ptr.To("2m")
			s.ExtraArgs = append(s.ExtraArgs, "-o", "slab_reassign")
		},
			cold("maxItemSize, extraArgs -o slab_reassign")},
		{"the item memory: resized in place", func(s *cachev1alpha1.MemcachedSpec) { s.MemoryLimitMB = ptr.To[int32](200) }, policy.WarmResizeWarning},
		{"the memory limit: resized in place", func(s *cachev1alpha1.MemcachedSpec) {
			s.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}
		}, policy.WarmResizeWarning},
		{"pod labels: the pods are replaced", func(s *cachev1alpha1.MemcachedSpec) { s.PodLabels = map[string]string{"team": "a"} }, policy.RestartWarning},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, warnings := policy.ValidateUpdate(defaulted(warm(nil)), defaulted(warm(tt.new)), policy.Limits{MaxSize: 10})
			g.Expect(warnings).To(ContainElement(tt.want))
		})
	}
	g := NewWithT(t)
	_, warnings := policy.ValidateUpdate(defaulted(nil), defaulted(func(s *cachev1alpha1.MemcachedSpec) { s.MaxConnections = ptr.To[int32](4096) }), policy.Limits{MaxSize: 10})
	g.Expect(warnings).To(ContainElement(policy.RestartWarning), "without warm restarts, the pods are replaced")
}

// TestUpdatesThatNeverBlock: an object that a tightened rule now refuses can
// still be labelled, have its finalizers removed, and be deleted.
func TestUpdatesThatNeverBlock(t *testing.T) {
	g := NewWithT(t)
	broken := defaulted(func(s *cachev1alpha1.MemcachedSpec) {
		s.ExtraArgs = []string{"-d"}
		s.Size = ptr.To[int32](50)
		s.Resources = nil
	})
	broken.Name = "Not.A.Label"
	broken.Finalizers = []string{"foregroundDeletion"}
	labelled := broken.DeepCopy()
	labelled.Labels = map[string]string{"team": "a"}
	deleting := broken.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	deleting.Finalizers = nil
	deleting.Spec.Size = ptr.To[int32](60)
	for _, mc := range []*cachev1alpha1.Memcached{labelled, deleting} {
		errs, warnings := policy.ValidateUpdate(broken, mc, policy.Limits{MaxSize: 10})
		g.Expect(errs).To(BeEmpty())
		g.Expect(warnings).To(BeEmpty())
	}
}

func TestParseItemSize(t *testing.T) {
	g := NewWithT(t)
	for in, want := range map[string]int64{"1024": 1024, "2k": 2048, "1m": 1 << 20, "64M": 64 << 20} {
		got, err := policy.ParseItemSize(in)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), in)
	}
	for _, in := range []string{"", "k", "-1", "0", "1g", "1.5m"} {
		_, err := policy.ParseItemSize(in)
		g.Expect(err).To(HaveOccurred(), in)
	}
}

// TestCheckKeepsOnlyWhatWasAccepted: the controller's entry point refuses
// every breach it was not told the fleet already had, and never keeps what
// the operator's flags would have to fill in.
func TestCheckKeepsOnlyWhatWasAccepted(t *testing.T) {
	g := NewWithT(t)
	mc := &cachev1alpha1.Memcached{Spec: cachev1alpha1.MemcachedSpec{PodAnnotations: map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "x", "k8s.io/other": "y"}}}
	mc.Name = "mc"
	errs := policy.Validate(mc)
	g.Expect(errs).To(HaveLen(2))
	resolved := policy.Resolve(&mc.Spec, policy.Config{})
	first := policy.RuleKey(errs[0])
	refused, kept := policy.Check(mc, resolved, func(e *field.Error) bool { return policy.RuleKey(e) == first })
	g.Expect(kept).To(ConsistOf(errs[0]))
	g.Expect(paths(refused)).To(ConsistOf(errs[1].Field, "spec.image"), "no --default-image: never kept")
	g.Expect(policy.RuleKey(errs[0])).To(Equal(policy.RuleKey(policy.Validate(mc.DeepCopy())[0])), "the same breach, the same key")
	g.Expect(policy.RuleKey(errs[0])).NotTo(Equal(policy.RuleKey(errs[1])))
}
