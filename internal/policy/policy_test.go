package policy_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
			g.Expect(*s.MemoryLimitMB).To(Equal(int32(64)))
			g.Expect(*s.MaxConnections).To(Equal(int32(1024)))
			g.Expect(*s.Threads).To(Equal(int32(4)))
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
	}, {
		name: "memory and threads derive from the container limits",
		in:   cachev1alpha1.MemcachedSpec{Resources: limits("1Gi", "1500m")},
		check: func(g Gomega, s cachev1alpha1.MemcachedSpec) {
			g.Expect(*s.MemoryLimitMB).To(Equal(int32(921)))
			g.Expect(*s.Threads).To(Equal(int32(2)))
		},
	}, {
		name: "a tiny memory limit still leaves memcached its minimum",
		in:   cachev1alpha1.MemcachedSpec{Resources: limits("4Mi", "")},
		check: func(g Gomega, s cachev1alpha1.MemcachedSpec) {
			g.Expect(*s.MemoryLimitMB).To(Equal(int32(8)))
			g.Expect(*s.Threads).To(Equal(int32(4)))
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
		{name: "memory above the container limit", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MemoryLimitMB = ptr.To[int32](200) }, errPaths: []string{"spec.memoryLimitMB"}},
		{name: "item size above half the memory", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.MemoryLimitMB, s.MaxItemSize = ptr.To[int32](64), ptr.To("33m")
		}, errPaths: []string{"spec.maxItemSize"}},
		{name: "item size below 1k", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = ptr.To("512") }, errPaths: []string{"spec.maxItemSize"}},
		{name: "item size unparsable", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.MaxItemSize = ptr.To("1g") }, errPaths: []string{"spec.maxItemSize"}},
		{name: "extra args owned by fields or fatal", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.ExtraArgs = []string{"-o", "modern", "-m", "--port=1", "-d"}
		}, errPaths: []string{"spec.extraArgs[2]", "spec.extraArgs[3]", "spec.extraArgs[4]"}},
		{name: "reserved pod label", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodLabels = map[string]string{"app.kubernetes.io/instance": "x", "team": "a"}
		}, errPaths: []string{"spec.podLabels[app.kubernetes.io/instance]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			errs, warnings := policy.ValidateCreate(defaulted(tt.mutate), lim)
			var paths []string
			for _, e := range errs {
				paths = append(paths, e.Field)
			}
			if tt.errPaths == nil {
				g.Expect(errs).To(BeEmpty())
			} else {
				g.Expect(paths).To(ConsistOf(tt.errPaths))
			}
			if tt.warning != "" {
				g.Expect(warnings).To(ContainElement(ContainSubstring(tt.warning)))
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
		restarts bool
	}{
		{name: "resize within bounds", new: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](5) }},
		{name: "port is immutable", new: func(s *cachev1alpha1.MemcachedSpec) { s.Port = ptr.To[int32](11212) }, errPaths: []string{"spec.port"}, restarts: true},
		{name: "size above a lowered --max-size is kept while unchanged",
			old: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](20) },
			new: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](20); s.Threads = ptr.To[int32](2) }, restarts: true},
		{name: "size above --max-size cannot grow",
			old: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](20) },
			new: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](21) }, errPaths: []string{"spec.size"}},
		{name: "image change warns that pods restart", new: func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To("memcached:2") }, restarts: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			errs, warnings := policy.ValidateUpdate(defaulted(tt.old), defaulted(tt.new), lim)
			var paths []string
			for _, e := range errs {
				paths = append(paths, e.Field)
			}
			g.Expect(paths).To(ConsistOf(tt.errPaths))
			restartWarning := ContainElement(ContainSubstring("replaces every memcached pod"))
			if tt.restarts {
				g.Expect(warnings).To(restartWarning)
			} else {
				g.Expect(warnings).NotTo(restartWarning)
			}
		})
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
