// Package specgen makes Memcached objects from a stream of bytes, for the
// property tests: Go's fuzzers drive it with their mutated inputs, the
// envtest suites with seeded random bytes. Every field is drawn from values
// users write, most of them valid and some of them not in every way users get
// them wrong, so that both sides of each rule are exercised.
package specgen

import (
	"math/rand/v2"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// source hands out choices from the input; past its end every choice is 0.
type source struct {
	data []byte
}

func (s *source) byte() byte {
	if len(s.data) == 0 {
		return 0
	}
	b := s.data[0]
	s.data = s.data[1:]
	return b
}

func (s *source) intn(n int) int { return int(s.byte()) % n }

// maybe is true about half the time.
func (s *source) maybe() bool { return s.byte()&1 == 1 }

// pick takes a valid value most of the time and an invalid one about one
// time in thirty-two, so that a spec with many fields is still often valid.
func pick[T any](s *source, valid, invalid []T) T {
	b := s.byte()
	if len(invalid) > 0 && b%32 == 31 {
		return invalid[int(s.byte())%len(invalid)]
	}
	return valid[int(b)%len(valid)]
}

func opt[T any](s *source, valid, invalid []T) *T {
	if !s.maybe() {
		return nil
	}
	return ptr.To(pick(s, valid, invalid))
}

func list[T any](s *source, maxLen int, gen func() T) []T {
	n := s.intn(maxLen + 1)
	if n == 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = gen()
	}
	return out
}

func strMap(s *source, maxLen int, keys, badKeys, values, badValues []string) map[string]string {
	n := s.intn(maxLen + 1)
	if n == 0 {
		return nil
	}
	m := map[string]string{}
	for range n {
		m[pick(s, keys, badKeys)] = pick(s, values, badValues)
	}
	return m
}

// Random is a Memcached from n seeded random bytes.
func Random(r *rand.Rand, n int) *cachev1alpha1.Memcached {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(r.UintN(256))
	}
	return Memcached(data)
}

// Memcached is the object the bytes describe; the same bytes always give
// the same object.
func Memcached(data []byte) *cachev1alpha1.Memcached {
	s := &source{data: data}
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{
		Name: pick(s, []string{"cache", "memcached-sample", "a", "sessions-eu-1", strings.Repeat("c", 63)},
			[]string{"cache.v2", "1cache", "Cache", "cache-", strings.Repeat("c", 64), "under_score"}),
	}}
	sp := &mc.Spec
	sp.Size = opt(s, []int32{0, 1, 2, 3, 5, 10}, []int32{-1, 11, 50, 1000, 1001})
	sp.Image = opt(s, []string{"memcached:1.6", "registry.example.com/cache/memcached:1.6.18", "memcached@sha256:" + strings.Repeat("ab", 32)},
		[]string{"", " memcached", "memcached:1.6 "})
	sp.ImagePullPolicy = opt(s, []corev1.PullPolicy{corev1.PullAlways, corev1.PullNever, corev1.PullIfNotPresent}, []corev1.PullPolicy{"Sometimes"})
	sp.ImagePullSecrets = list(s, 2, func() corev1.LocalObjectReference {
		return corev1.LocalObjectReference{Name: pick(s, []string{"regcred", "mirror"}, []string{"", "Bad_Name"})}
	})
	sp.Port = opt(s, []int32{11211, 1, 65535, 11311}, []int32{0, 70000})
	sp.MemoryLimitMB = opt(s, []int32{8, 64, 100, 230, 900}, []int32{7, 5000})
	sp.MaxConnections = opt(s, []int32{1, 1024, 65536}, []int32{0, -5})
	sp.Threads = opt(s, []int32{1, 4, 16}, []int32{0, 300})
	sp.MaxItemSize = opt(s, []string{"1m", "512k", "2m", "1024", "4M"}, []string{"1g", "100", "64m", "0", "abc", "1.5m"})
	sp.Verbosity = opt(s, []int32{0, 1, 2}, []int32{3, -1})
	sp.ExtraArgs = list(s, 3, func() string {
		return pick(s, []string{"-C", "-M", "-F", "--disable-cas", "-o", "modern", "-R20", "--listen-backlog=512", "-B", "ascii", "-MC", "--slab-growth=1.1"},
			[]string{"-m", "64", "-m2048", "-m 2048", "-vd", "--memory-limit=1", "--mem=1", "-d", "-L", "--", "modern,", "-o", "ssl_key=x", "--port", "-Z", "-uroot", "-R"})
	})
	if s.maybe() {
		sp.Resources = resources(s)
	}
	sp.NodeSelector = strMap(s, 2, []string{"pool", "kubernetes.io/os", "example.com/tier"}, []string{"bad key", "a/b/c"}, []string{"cache", "linux", ""}, []string{"a b", "-x-"})
	sp.Tolerations = list(s, 2, func() corev1.Toleration { return toleration(s) })
	if s.maybe() {
		sp.Affinity = affinity(s)
	}
	sp.AntiAffinityPreset = opt(s, []cachev1alpha1.AntiAffinityPreset{cachev1alpha1.AntiAffinitySoft, cachev1alpha1.AntiAffinityHard}, []cachev1alpha1.AntiAffinityPreset{"medium"})
	sp.TopologySpreadConstraints = list(s, 2, func() corev1.TopologySpreadConstraint { return spread(s) })
	if s.maybe() {
		bound := func() *intstr.IntOrString {
			return opt(s, []intstr.IntOrString{intstr.FromInt32(0), intstr.FromInt32(1), intstr.FromString("50%"), intstr.FromString("100%")},
				[]intstr.IntOrString{intstr.FromInt32(-1), intstr.FromString("150%"), intstr.FromString("lots"), intstr.FromString("5")})
		}
		sp.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{Enabled: opt(s, []bool{true, false}, nil)}
		// Both bounds at once is its own error; draw the second rarely.
		if s.maybe() {
			sp.PodDisruptionBudget.MinAvailable = bound()
		} else {
			sp.PodDisruptionBudget.MaxUnavailable = bound()
		}
		if s.intn(8) == 0 {
			sp.PodDisruptionBudget.MaxUnavailable = bound()
		}
	}
	sp.PodLabels = strMap(s, 2, []string{"team", "example.com/owner"}, []string{"app.kubernetes.io/instance", "bad key"}, []string{"a", "cache-1"}, []string{"-b-", "a b"})
	sp.PodAnnotations = strMap(s, 2, []string{"note", "example.com/scrape"}, []string{"a/b/c", "", "Memcached.Cache.Example.com/args", "controller.kubernetes.io/pod-deletion-cost"}, []string{"anything at all", ""}, nil)
	if s.intn(4) == 0 {
		sp.Service = &cachev1alpha1.ServiceSpec{
			Labels:      strMap(s, 2, []string{"team", "example.com/owner"}, []string{"app.kubernetes.io/managed-by", "kubernetes.io/service-name", "Bad Key"}, []string{"a"}, []string{"a b"}),
			Annotations: strMap(s, 2, []string{"external-dns.alpha.kubernetes.io/hostname", "note"}, []string{"a/b/c"}, []string{"cache.example.org"}, nil),
		}
	}
	sp.PriorityClassName = opt(s, []string{"high", "system-cluster-critical"}, []string{"Bad_Name", ""})
	if s.maybe() {
		m := &cachev1alpha1.MonitoringSpec{}
		if s.maybe() {
			m.Exporter = &cachev1alpha1.ExporterSpec{
				Enabled: opt(s, []bool{true, false}, nil),
				Image:   opt(s, []string{"registry.example.com/memcached-operator:0.2.0"}, []string{"", " op"}),
			}
			if s.maybe() {
				m.Exporter.Resources = resources(s)
			}
		}
		if s.maybe() {
			m.ServiceMonitor = &cachev1alpha1.ServiceMonitorSpec{
				Enabled:  opt(s, []bool{true, false}, nil),
				Interval: opt(s, []string{"30s", "1m", "15s"}, []string{"soon", "5x"}),
				Labels:   strMap(s, 1, []string{"release"}, []string{"bad key"}, []string{"prometheus"}, []string{"-x-"}),
			}
		}
		sp.Monitoring = m
	}
	// Drawn last, so the seed corpora keep producing the specs they did.
	sp.NodeLossTolerationSeconds = opt(s, []int64{0, 30, 300, 86400}, []int64{-1, 86401})
	if s.maybe() {
		sp.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{
			Enabled:     opt(s, []bool{true, false}, nil),
			From:        list(s, 3, func() networkingv1.NetworkPolicyPeer { return peer(s) }),
			MetricsFrom: list(s, 2, func() networkingv1.NetworkPolicyPeer { return peer(s) }),
		}
	}
	if s.maybe() {
		sp.Auth = &cachev1alpha1.AuthSpec{
			SecretRef: cachev1alpha1.AuthSecretReference{
				Name: pick(s, []string{"memcached-auth", "cache.users", "a"}, []string{"Bad_Name", "-x", strings.Repeat("a", 254)}),
				Key:  opt(s, []string{"auth", "users.txt", "auth_file-1"}, []string{"a/b", "..", "bad key"}),
			},
			ReloaderImage: opt(s, []string{"registry.example.com/memcached-operator:0.2.0"}, []string{"", " op"}),
		}
	}
	if s.maybe() {
		t := &cachev1alpha1.TLSSpec{
			Enabled:       pick(s, []bool{true, false}, nil),
			ClientAuth:    opt(s, []cachev1alpha1.TLSClientAuth{cachev1alpha1.TLSClientAuthNone, cachev1alpha1.TLSClientAuthRequest, cachev1alpha1.TLSClientAuthRequire}, []cachev1alpha1.TLSClientAuth{"Maybe"}),
			PlaintextPort: opt(s, []int32{11311, 1, 65535}, []int32{0, 65536, 11211, 11299}),
			ReloaderImage: opt(s, []string{"registry.example.com/memcached-operator:0.2.0"}, []string{"", " op"}),
		}
		// Nearly always an issuer: an enabled TLS without one is refused,
		// and the generator must keep exercising the accepting side.
		if s.byte()%32 != 31 {
			t.IssuerRef = &cachev1alpha1.TLSIssuerReference{
				Name:  pick(s, []string{"ca", "corp.issuer", "a"}, []string{"Bad_Name", "", strings.Repeat("a", 254)}),
				Kind:  opt(s, []string{"Issuer", "ClusterIssuer"}, []string{"Cluster", "issuer"}),
				Group: opt(s, []string{"cert-manager.io", "awspca.cert-manager.io"}, []string{"Bad_Group", ""}),
			}
		}
		sp.TLS = t
	}
	sp.AppArmorProfile = opt(s, []corev1.AppArmorProfileType{corev1.AppArmorProfileTypeRuntimeDefault}, []corev1.AppArmorProfileType{corev1.AppArmorProfileTypeUnconfined, "Localhost"})
	sp.Workload = opt(s, []cachev1alpha1.Workload{cachev1alpha1.WorkloadDeployment, cachev1alpha1.WorkloadStatefulSet}, []cachev1alpha1.Workload{"Pod", "statefulset"})
	if s.maybe() {
		sp.WarmRestart = &cachev1alpha1.WarmRestartSpec{
			Enabled:       pick(s, []bool{true, false}, nil),
			LauncherImage: opt(s, []string{"registry.example.com/memcached-operator:0.2.0"}, []string{"", " op"}),
		}
	}
	return mc
}

// peer is a NetworkPolicy peer of one of the shapes the API server knows,
// or, now and then, one it refuses (no selector, ipBlock with a selector).
func peer(s *source) networkingv1.NetworkPolicyPeer {
	selector := func() *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: strMap(s, 1, []string{"role", "kubernetes.io/metadata.name"}, []string{"bad key"}, []string{"web", "monitoring"}, []string{"-x-"})}
	}
	var p networkingv1.NetworkPolicyPeer
	switch pick(s, []int{0, 1, 2, 3}, []int{4, 5}) {
	case 0:
		p.PodSelector = selector()
	case 1:
		p.NamespaceSelector = selector()
	case 2:
		p.PodSelector, p.NamespaceSelector = selector(), selector()
	case 3:
		// Each block with an exception inside it.
		blocks := map[string]string{"10.0.0.0/8": "10.1.0.0/16", "192.168.1.0/24": "192.168.1.128/25", "fd00::/8": "fd00:1::/32"}
		p.IPBlock = &networkingv1.IPBlock{CIDR: pick(s, []string{"10.0.0.0/8", "192.168.1.0/24", "fd00::/8"}, []string{"10.0.0.1/8", "10.0.0.0/33", "not a cidr"})}
		if s.maybe() {
			p.IPBlock.Except = []string{pick(s, []string{blocks[p.IPBlock.CIDR]}, []string{"172.16.0.0/12", p.IPBlock.CIDR})}
		}
	case 5:
		p.IPBlock, p.PodSelector = &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, selector()
	}
	return p
}

func resources(s *source) *corev1.ResourceRequirements {
	r := &corev1.ResourceRequirements{}
	q := func(valid, invalid []string) resource.Quantity { return resource.MustParse(pick(s, valid, invalid)) }
	if s.maybe() {
		r.Limits = corev1.ResourceList{corev1.ResourceMemory: q([]string{"64Mi", "256Mi", "1Gi", "9Mi"}, []string{"4Mi", "-1Mi"})}
		if s.maybe() {
			r.Limits[corev1.ResourceCPU] = q([]string{"500m", "2", "1500m"}, []string{"-1"})
		}
	}
	if s.maybe() {
		r.Requests = corev1.ResourceList{corev1.ResourceMemory: q([]string{"32Mi", "64Mi"}, []string{"2Gi"})}
		if s.intn(12) == 0 {
			r.Requests["example.com/gpu"] = resource.MustParse("1")
		}
	}
	return r
}

func toleration(s *source) corev1.Toleration {
	t := corev1.Toleration{
		Key:      pick(s, []string{"dedicated", "example.com/cache"}, []string{"", "bad key"}),
		Operator: pick(s, []corev1.TolerationOperator{corev1.TolerationOpExists, corev1.TolerationOpEqual, ""}, []corev1.TolerationOperator{"Foo"}),
		Effect:   pick(s, []corev1.TaintEffect{"", corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute}, []corev1.TaintEffect{"Bad"}),
	}
	if t.Operator != corev1.TolerationOpExists || s.intn(12) == 0 {
		t.Value = pick(s, []string{"cache", ""}, []string{"bad value!"})
	}
	if t.Effect == corev1.TaintEffectNoExecute || s.intn(12) == 0 {
		t.TolerationSeconds = ptr.To[int64](30)
	}
	return t
}

func affinity(s *source) *corev1.Affinity {
	a := &corev1.Affinity{}
	if s.maybe() {
		op := pick(s, []corev1.NodeSelectorOperator{corev1.NodeSelectorOpIn, corev1.NodeSelectorOpExists, corev1.NodeSelectorOpGt},
			[]corev1.NodeSelectorOperator{"Bogus"})
		req := corev1.NodeSelectorRequirement{Key: pick(s, []string{"pool", "example.com/gen"}, []string{"bad key"}), Operator: op}
		switch op {
		case corev1.NodeSelectorOpIn:
			req.Values = []string{pick(s, []string{"cache", "a"}, []string{"a b"})}
		case corev1.NodeSelectorOpGt:
			req.Values = []string{pick(s, []string{"3", "10"}, []string{"three"})}
		}
		if s.intn(12) == 0 {
			req.Values = nil
		}
		a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
		}}
	}
	if s.maybe() {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: pick(s, []int32{1, 50, 100}, []int32{0, 101}),
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   pick(s, []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}, []string{""}),
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": pick(s, []string{"memcached"}, []string{"-x-"})}},
			},
		}}}
	}
	return a
}

func spread(s *source) corev1.TopologySpreadConstraint {
	c := corev1.TopologySpreadConstraint{
		MaxSkew:           pick(s, []int32{1, 2}, []int32{0}),
		TopologyKey:       pick(s, []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname"}, []string{"", "bad key"}),
		WhenUnsatisfiable: pick(s, []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}, []corev1.UnsatisfiableConstraintAction{"Bad"}),
	}
	if s.intn(4) == 0 {
		c.MinDomains = ptr.To(pick(s, []int32{1, 2}, []int32{0}))
	}
	if s.intn(4) == 0 {
		c.MatchLabelKeys = []string{pick(s, []string{"pod-template-hash"}, []string{"bad key"})}
	}
	return c
}
