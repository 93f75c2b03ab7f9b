package webhooks_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/test/testenv"
)

func newNamespace() string {
	GinkgoHelper()
	ns, err := testenv.NewNamespace(ctx, k8s, "wh-")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

func memcachedIn(ns string, mutate func(*cachev1alpha1.MemcachedSpec)) *cachev1alpha1.Memcached {
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample", Namespace: ns},
		Spec: cachev1alpha1.MemcachedSpec{
			Size:      ptr.To[int32](3),
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
		},
	}
	if mutate != nil {
		mutate(&mc.Spec)
	}
	return mc
}

// invalidFields are the field paths of an Invalid error from the API server.
func invalidFields(err error) []string {
	var status apierrors.APIStatus
	Expect(errors.As(err, &status)).To(BeTrue(), "expected an API error, got %v", err)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected Invalid, got %v", err)
	var fields []string
	for _, c := range status.Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	return fields
}

var _ = Describe("Defaulting webhook", func() {
	It("stores a Memcached that gave only size with every default filled in", func() {
		ns := newNamespace()
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "only-size", Namespace: ns},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		stored := &cachev1alpha1.Memcached{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), stored)).To(Succeed())
		s := stored.Spec
		Expect(*s.Size).To(Equal(int32(2)))
		Expect(*s.Image).To(Equal(defaultImage))
		Expect(*s.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent))
		Expect(*s.Port).To(Equal(int32(11211)))
		Expect(s.MemoryLimitMB).To(BeNil(), "derived when pods are built, never stored")
		Expect(*s.MaxConnections).To(Equal(int32(1024)))
		Expect(s.Threads).To(BeNil(), "derived when pods are built, never stored")
		Expect(*s.MaxItemSize).To(Equal("1m"))
		Expect(*s.Verbosity).To(BeZero())
	})

	It("admits cache.example.com/v1beta1 as it admits v1alpha1: defaulted, refused with the field path, and read back in either version", func() {
		ns := newNamespace()
		beta := func(name, spec string) *unstructured.Unstructured {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(`apiVersion: cache.example.com/v1beta1
kind: Memcached
metadata: {name: `+name+`, namespace: `+ns+`}
spec: `+spec), &u.Object)).To(Succeed())
			return u
		}
		created := beta("beta", "{size: 2}")
		Expect(k8s.Create(ctx, created)).To(Succeed())
		Expect(created.GetAPIVersion()).To(Equal("cache.example.com/v1beta1"))
		image, _, _ := unstructured.NestedString(created.Object, "spec", "image")
		Expect(image).To(Equal(defaultImage), "the defaulting webhook ran")
		stored := &cachev1alpha1.Memcached{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "beta"}, stored)).To(Succeed())
		Expect(*stored.Spec.Size).To(Equal(int32(2)))
		Expect(*stored.Spec.Image).To(Equal(defaultImage))

		err := k8s.Create(ctx, beta("bad", `{size: 2, extraArgs: ["-m", "64"]}`))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.extraArgs[0]"))

		alpha := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "alpha", Namespace: ns}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
		Expect(k8s.Create(ctx, alpha)).To(Succeed())
		read := beta("alpha", "{}")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(read), read)).To(Succeed())
		Expect(read.GetAPIVersion()).To(Equal("cache.example.com/v1beta1"))
		size, _, _ := unstructured.NestedInt64(read.Object, "spec", "size")
		image, _, _ = unstructured.NestedString(read.Object, "spec", "image")
		Expect(size).To(Equal(int64(1)))
		Expect(image).To(Equal(defaultImage))
	})

	It("sets nodeLossTolerationSeconds on create only, so editing a fleet older than the field never rolls it", func() {
		ns := newNamespace()
		mc := memcachedIn(ns, nil)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Expect(mc.Spec.NodeLossTolerationSeconds).To(HaveValue(Equal(policy.DefaultNodeLossTolerationSeconds)))

		By("a fleet without the field, as one created before it existed")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/nodeLossTolerationSeconds"}]`)))).To(Succeed())
		Expect(mc.Spec.NodeLossTolerationSeconds).To(BeNil())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"edited":"yes"}},"spec":{"size":2}}`)))).To(Succeed())
		Expect(mc.Spec.NodeLossTolerationSeconds).To(BeNil(), "an update does not add it")

		By("the schema bounds it")
		err := k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeLossTolerationSeconds":-1}}`)))
		Expect(invalidFields(err)).To(ConsistOf("spec.nodeLossTolerationSeconds"))
	})

	It("keeps what the user set and stores no derived value, so the memory limit can later go down or up", func() {
		ns := newNamespace()
		mc := memcachedIn(ns, func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To("mine:1"); s.Threads = ptr.To[int32](2) })
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Expect(mc.Spec.MemoryLimitMB).To(BeNil())
		Expect(*mc.Spec.Image).To(Equal("mine:1"))
		Expect(*mc.Spec.Threads).To(Equal(int32(2)))
		for _, mem := range []string{"128Mi", "1Gi", "64Mi"} {
			patch := fmt.Sprintf(`{"spec":{"resources":{"limits":{"memory":%q}}}}`, mem)
			Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed(), mem)
		}
		By("a memoryLimitMB the user sets is held to the limit, on that field")
		err := k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"memoryLimitMB":100}}`)))
		Expect(invalidFields(err)).To(ConsistOf("spec.memoryLimitMB"))
	})

	It("stores the values the user wrote as written, quantities too, on create and on update", func() {
		ns := newNamespace()
		u := &unstructured.Unstructured{}
		Expect(yaml.Unmarshal([]byte(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: spelled, namespace: `+ns+`}
spec:
  size: 1
  resources: {limits: {cpu: 1000m, memory: 262144Ki}, requests: {cpu: "0.5"}}`), &u.Object)).To(Succeed())
		spelled := func() {
			GinkgoHelper()
			stored := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached"}}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "spelled"}, stored)).To(Succeed())
			res, _, _ := unstructured.NestedMap(stored.Object, "spec", "resources")
			Expect(res).To(Equal(map[string]any{
				"limits":   map[string]any{"cpu": "1000m", "memory": "262144Ki"},
				"requests": map[string]any{"cpu": "0.5"},
			}))
			image, _, _ := unstructured.NestedString(stored.Object, "spec", "image")
			Expect(image).To(Equal(defaultImage), "the defaulting webhook ran")
		}
		Expect(k8s.Create(ctx, u)).To(Succeed())
		spelled()

		By("an update that brings a default")
		Expect(k8s.Patch(ctx, u, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/maxItemSize"}]`)))).To(Succeed())
		maxItemSize, _, _ := unstructured.NestedString(u.Object, "spec", "maxItemSize")
		Expect(maxItemSize).To(Equal(policy.DefaultMaxItemSize))
		spelled()
	})

	It("pins the exporter's image once the exporter is enabled, on create or on a later update", func() {
		ns := newNamespace()
		mc := memcachedIn(ns, nil)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Expect(mc.Spec.Monitoring).To(BeNil())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":{"exporter":{"enabled":true}}}}`)))).To(Succeed())
		Expect(*mc.Spec.Monitoring.Exporter.Image).To(Equal(exporterImage))
		err := k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":{"exporter":{"enabled":false},"serviceMonitor":{"enabled":true}}}}`)))
		Expect(invalidFields(err)).To(ConsistOf("spec.monitoring.serviceMonitor.enabled"))
	})

	It("accepts every sample in docs/samples", func() {
		ns := newNamespace()
		files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "docs", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			raw, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			mc := &cachev1alpha1.Memcached{}
			Expect(yaml.UnmarshalStrict(raw, mc)).To(Succeed(), f)
			mc.Namespace = ns
			Expect(k8s.Create(ctx, mc)).To(Succeed(), f)
		}
	})

	It("takes the tutorial's sample unchanged (defaulted, with a warning for no memory limit)", func() {
		ns := newNamespace()
		warnings.take()
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample", Namespace: ns},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)}}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Expect(warnings.take()).To(ContainElement(ContainSubstring("limits.memory is not set")))
	})
})

var _ = Describe("Validating webhook", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	DescribeTable("rejects a bad Memcached with its field path, storing nothing",
		func(mutate func(*cachev1alpha1.MemcachedSpec), field, message string) {
			mc := memcachedIn(ns, mutate)
			err := k8s.Create(ctx, mc)
			Expect(err).To(HaveOccurred())
			Expect(invalidFields(err)).To(ContainElement(field))
			Expect(err.Error()).To(ContainSubstring(message))
			Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(mc), &cachev1alpha1.Memcached{}))).To(BeTrue())
		},
		Entry("size below 0 (schema)", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](-1) }, "spec.size", "greater than or equal to 0"),
		Entry("size above --max-size", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](maxSize + 1) }, "spec.size", "--max-size"),
		Entry("size above the schema cap", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](1001) }, "spec.size", "less than or equal to 1000"),
		Entry("memory above the container limit", func(s *cachev1alpha1.MemcachedSpec) { s.MemoryLimitMB = ptr.To[int32](512) }, "spec.memoryLimitMB", "must fit inside resources.limits.memory"),
		Entry("item size above half the memory", func(s *cachev1alpha1.MemcachedSpec) {
			s.MemoryLimitMB, s.MaxItemSize = ptr.To[int32](64), ptr.To("40m")
		}, "spec.maxItemSize", "at most half of memoryLimitMB"),
		Entry("an extra arg that a field owns", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-m", "10"} }, "spec.extraArgs[0]", "set by spec.memoryLimitMB"),
		Entry("an owned option with its value attached", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-C", "-m2048"} }, "spec.extraArgs[1]", "set by spec.memoryLimitMB"),
		Entry("an owned option and its value in one argument", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-m 2048"} }, "spec.extraArgs[0]", "set by spec.memoryLimitMB"),
		Entry("-d clustered behind -v", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-vd"} }, "spec.extraArgs[0]", "daemonizes"),
		Entry("a long option", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"--memory-limit=4096"} }, "spec.extraArgs[0]", "set by spec.memoryLimitMB"),
		Entry("a long option's prefix", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"--po=1"} }, "spec.extraArgs[0]", "set by spec.port"),
		Entry("--daemon", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"--daemon"} }, "spec.extraArgs[0]", "daemonizes"),
		Entry("a PDB bound that is no number (schema)", func(s *cachev1alpha1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("lots"))}
		}, "spec.podDisruptionBudget.minAvailable", "percentage from 0% to 100%"),
		Entry("a negative PDB bound (schema)", func(s *cachev1alpha1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(-1))}
		}, "spec.podDisruptionBudget.maxUnavailable", "whole number of 0 or more"),
		Entry("a PDB percentage above 100 (schema)", func(s *cachev1alpha1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromString("150%"))}
		}, "spec.podDisruptionBudget.maxUnavailable", "percentage from 0% to 100%"),
		Entry("an image pull secret listed twice (schema)", func(s *cachev1alpha1.MemcachedSpec) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}, {Name: "regcred"}}
		}, "spec.imagePullSecrets[1]", "Duplicate value"),
		Entry("a spread constraint listed twice (schema)", func(s *cachev1alpha1.MemcachedSpec) {
			c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c, c}
		}, "spec.topologySpreadConstraints[1]", "Duplicate value"),
		Entry("an invalid pod label value", func(s *cachev1alpha1.MemcachedSpec) { s.PodLabels = map[string]string{"team": "-a-"} }, "spec.podLabels", "valid label"),
		Entry("an invalid nodeSelector key", func(s *cachev1alpha1.MemcachedSpec) { s.NodeSelector = map[string]string{"bad key": "x"} }, "spec.nodeSelector", "name part must consist"),
		Entry("an invalid annotation key", func(s *cachev1alpha1.MemcachedSpec) { s.PodAnnotations = map[string]string{"a/b/c": "x"} }, "spec.podAnnotations", "valid label key"),
		// The CRD's CEL rule, so it holds with the webhooks off too.
		Entry("both PDB bounds (schema)", func(s *cachev1alpha1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		}, "spec", "set minAvailable or maxUnavailable, not both"),
		Entry("a reserved pod label", func(s *cachev1alpha1.MemcachedSpec) {
			s.PodLabels = map[string]string{"app.kubernetes.io/instance": "other"}
		}, "spec.podLabels[app.kubernetes.io/instance]", "cannot be overridden"),
	)

	DescribeTable("refuses a name that cannot name the fleet's Service (schema)", func(name string) {
		mc := memcachedIn(ns, nil)
		mc.Name = name
		err := k8s.Create(ctx, mc)
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("DNS-1035 label"))
	},
		Entry("a dot", "cache.v2"),
		Entry("a leading digit", "1cache"),
		Entry("64 characters", strings.Repeat("c", 64)),
		Entry("a trailing dash", "cache-"),
	)

	It("refuses to change the port, an immutable field, and says how to change it", func() {
		mc := memcachedIn(ns, nil)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		err := k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"port":11212}}`)))
		Expect(invalidFields(err)).To(ConsistOf("spec.port"))
		Expect(err.Error()).To(And(ContainSubstring("immutable"), ContainSubstring("create a new Memcached")))
		By("the schema holds it, so it holds where the webhooks do not run")
		crd := &apiextensionsv1.CustomResourceDefinition{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "memcacheds.cache.example.com"}, crd)).To(Succeed())
		port := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["port"]
		Expect(port.XValidations).To(ContainElement(HaveField("Rule", "self == oldSelf")))
		stored := &cachev1alpha1.Memcached{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), stored)).To(Succeed())
		Expect(*stored.Spec.Port).To(Equal(int32(11211)))
	})

	It("bounds every list and map a tenant fills in the schema itself, so the bounds hold with the webhooks off", func() {
		many := func(n, size int) map[string]string {
			m := map[string]string{}
			for i := range n {
				m[fmt.Sprintf("team.example.com/k%d", i)] = strings.Repeat("v", size)
			}
			return m
		}
		tolerations := make([]corev1.Toleration, 33)
		for i := range tolerations {
			tolerations[i] = corev1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: corev1.TolerationOpExists}
		}
		for field, mutate := range map[string]func(*cachev1alpha1.MemcachedSpec){
			"spec.podLabels":      func(s *cachev1alpha1.MemcachedSpec) { s.PodLabels = many(33, 1) },
			"spec.podAnnotations": func(s *cachev1alpha1.MemcachedSpec) { s.PodAnnotations = many(33, 1) },
			"spec.tolerations":    func(s *cachev1alpha1.MemcachedSpec) { s.Tolerations = tolerations },
			"spec.extraArgs[0]":   func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-o", strings.Repeat("modern,", 40)} },
		} {
			err := k8s.Create(ctx, memcachedIn(ns, mutate), client.DryRunAll)
			Expect(invalidFields(err)).To(ContainElement(HavePrefix(strings.TrimSuffix(field, "[0]"))), field)
			Expect(err.Error()).To(Or(ContainSubstring("must have at most"), ContainSubstring("may not be more than")), "%s: the schema's words, not the webhook's", field)
		}
		err := k8s.Create(ctx, memcachedIn(ns, func(s *cachev1alpha1.MemcachedSpec) { s.PodAnnotations = many(2, 1025) }), client.DryRunAll)
		Expect(err).To(MatchError(ContainSubstring("each pod annotation's value is at most 1024 bytes")))
		Expect(k8s.Create(ctx, memcachedIn(ns, func(s *cachev1alpha1.MemcachedSpec) { s.PodLabels, s.PodAnnotations = many(32, 1), many(32, 1024) }), client.DryRunAll)).
			To(Succeed(), "the bounds themselves are admitted")
	})

	It("bounds kubectl patch of size and warns that a pod-template change restarts pods", func() {
		mc := memcachedIn(ns, nil)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		err := k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":50}}`)))
		Expect(invalidFields(err)).To(ConsistOf("spec.size"))
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":5}}`)))).To(Succeed())

		warnings.take()
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"image":"memcached:2"}}`)))).To(Succeed())
		Expect(warnings.take()).To(ContainElement(ContainSubstring("each new pod starts with an empty cache")))
	})

	It("bounds the scale subresource, as kubectl scale uses it", func() {
		mc := memcachedIn(ns, nil)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		err := k8s.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: maxSize + 1}}))
		Expect(invalidFields(err)).To(ConsistOf("spec.replicas"))
		Expect(err.Error()).To(ContainSubstring("--max-size"))

		Expect(k8s.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: maxSize}}))).To(Succeed())
		stored := &cachev1alpha1.Memcached{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mc), stored)).To(Succeed())
		Expect(*stored.Spec.Size).To(Equal(int32(maxSize)))
	})

	It("warns about size 0 without rejecting it", func() {
		warnings.take()
		Expect(k8s.Create(ctx, memcachedIn(ns, func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](0) }))).To(Succeed())
		Expect(warnings.take()).To(ContainElement(ContainSubstring("spec.size is 0")))
	})
})

var _ = Describe("The ServiceMonitor's interval", func() {
	It("is at least 10s, in the schema", func() {
		ns := newNamespace()
		for interval, ok := range map[string]bool{"5s": false, "9s999ms": false, "10s": true, "1m": true, "0": true} {
			err := k8s.Create(ctx, memcachedIn(ns, func(s *cachev1alpha1.MemcachedSpec) {
				s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)},
					ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Enabled: ptr.To(true), Interval: ptr.To(interval)}}
			}), client.DryRunAll)
			if ok {
				Expect(err).NotTo(HaveOccurred(), interval)
			} else {
				Expect(err).To(MatchError(ContainSubstring("must be at least 10s")), interval)
			}
		}
	})
})
