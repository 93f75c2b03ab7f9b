package chart_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/installcheck"
)

// This suite runs no webhook server: what it refuses, the API server
// refuses on its own, as it would with the operator down.
var _ = Describe("The limits policy (admissionPolicy.enabled), with no webhook running", Ordered, func() {
	const rel, ns, capped, free = "mc-limits", "mc-limits-system", "limits-capped", "limits-free"
	fleet := func(namespace, name string, mutate func(*cachev1alpha1.MemcachedSpec)) *cachev1alpha1.Memcached {
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
		if mutate != nil {
			mutate(&mc.Spec)
		}
		return mc
	}
	invalid := func(part string) OmegaMatcher {
		return And(HaveOccurred(), WithTransform(func(err error) string { return err.Error() }, And(ContainSubstring("ValidatingAdmissionPolicy"), ContainSubstring(part))))
	}

	BeforeAll(func(ctx SpecContext) {
		for _, n := range []string{ns, capped, free} {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))).To(Succeed())
		}
		vals := ciValues("default")
		vals["operator"] = map[string]any{"maxSize": 8}
		for _, obj := range renderSet(rel, ns, vals) {
			if (strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") && !warmPodsPolicy(obj)) || (obj.GetKind() == "ConfigMap" && obj.GetName() == rel+"-memcached-operator-limits") {
				Expect(applyObject(ctx, k8sClient, obj)).To(Succeed(), obj.GetKind()+" "+obj.GetName())
			}
		}
		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: capped, Name: "team-limits",
			Labels: map[string]string{"memcached.cache.example.com/limits": "true"}},
			Data: map[string]string{"maxSize": "3", "allowedImagePrefixes": "registry.example.com/, mirror.example.com/memcached:", "requireAuth": "true"}})).To(Succeed())
		// In force once it refuses: the API server loads policies a moment after they are created.
		Eventually(func() error {
			return k8sClient.Create(ctx, fleet(free, "probe", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](9) }), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("must be less than or equal to 8, the operator's --max-size"))
	})

	It("holds --max-size in every namespace, on create, patch and the scale subresource, and lets a fleet above a lowered cap shrink", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, fleet(free, "eight", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](8) }))).To(Succeed())
		mc := fleet(free, "eight", nil)
		Expect(k8sClient.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":9}}`)))).To(invalid("spec.size: Invalid value: 9"))
		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(ctx, mc, scale)).To(Succeed())
		scale.Spec.Replicas = 12
		Expect(k8sClient.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))).To(invalid("spec.replicas: Invalid value: 12"))
		Expect(k8sClient.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`)))).To(Succeed(), "metadata is not judged")

		By("a fleet stored above the cap (before it was lowered) keeps its size and may shrink, not grow")
		big := fleet(free, "big", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](8) })
		Expect(k8sClient.Create(ctx, big)).To(Succeed())
		Expect(k8sClient.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rel + "-memcached-operator-limits"}},
			client.RawPatch(types.MergePatchType, []byte(`{"data":{"maxSize":"4"}}`)))).To(Succeed())
		Eventually(func() error {
			return k8sClient.Patch(ctx, big, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":9}}`)), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("less than or equal to 4"))
		Expect(k8sClient.Patch(ctx, big, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxConnections":2048}}`)))).To(Succeed(), "an edit that keeps the size")
		Expect(k8sClient.Patch(ctx, big, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":6}}`)))).To(Succeed(), "a shrink still above the cap")
		Expect(k8sClient.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rel + "-memcached-operator-limits"}},
			client.RawPatch(types.MergePatchType, []byte(`{"data":{"maxSize":"8"}}`)))).To(Succeed())
	})

	It("holds a namespace's own caps: a lower size, image registries, auth required", func(ctx SpecContext) {
		auth := func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}}
		}
		// The API server reads a policy's parameters through an informer: the
		// namespace's ConfigMap may reach it after the cap above changed.
		Eventually(func() error {
			return k8sClient.Create(ctx, fleet(capped, "four", func(s *cachev1alpha1.MemcachedSpec) { auth(s); s.Size = ptr.To[int32](4) }), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("must be less than or equal to 3, the limit of ConfigMap team-limits of this namespace"))
		Expect(k8sClient.Create(ctx, fleet(capped, "docker", func(s *cachev1alpha1.MemcachedSpec) { auth(s); s.Image = ptr.To("docker.io/memcached:1.6") }), client.DryRunAll)).
			To(invalid("is not from an allowed registry"))
		Expect(k8sClient.Create(ctx, fleet(capped, "lookalike", func(s *cachev1alpha1.MemcachedSpec) {
			auth(s)
			s.Image = ptr.To("registry.example.com.evil.io/memcached:1.6")
		}), client.DryRunAll)).To(invalid("is not from an allowed registry"), "a prefix ends at its slash")
		Expect(k8sClient.Create(ctx, fleet(capped, "open", nil), client.DryRunAll)).To(invalid("requires spec.auth"))
		Expect(k8sClient.Create(ctx, fleet(capped, "ok", func(s *cachev1alpha1.MemcachedSpec) {
			auth(s)
			s.Image = ptr.To("mirror.example.com/memcached:1.6.18")
		}), client.DryRunAll)).To(Succeed())
		Expect(k8sClient.Create(ctx, fleet(capped, "default-image", auth), client.DryRunAll)).To(Succeed(), "an unset image is not judged")
		Expect(k8sClient.Create(ctx, fleet(free, "open", func(s *cachev1alpha1.MemcachedSpec) { s.Image = ptr.To("docker.io/memcached:1.6") }), client.DryRunAll)).
			To(Succeed(), "another namespace's caps are not this one's")
	})

	It("admits the helm test's invalid spec, which only the validating webhook may refuse", func(ctx SpecContext) {
		spec, _ := installcheck.InvalidSpec()
		mc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": cachev1alpha1.GroupVersion.String(), "kind": "Memcached",
			"metadata": map[string]any{"namespace": capped, "name": "helm-test-invalid"}, "spec": spec}}
		Expect(unstructured.SetNestedField(mc.Object, map[string]any{"secretRef": map[string]any{"name": "users"}}, "spec", "auth")).To(Succeed())
		Expect(k8sClient.Create(ctx, mc, client.DryRunAll)).To(Succeed(), "the schema and the policies let it through, so a refusal in helm test is the webhook's")
	})

	It("holds the operator's rules without the webhook, and ratchets them for an object stored before", func(ctx SpecContext) {
		// Each refusal names the argument and says why, as the webhook would.
		for args, want := range map[string]string{
			"-d":                    "spec.extraArgs[0]: -d: -d daemonizes, so the container's main process exits",
			"-vd":                   "spec.extraArgs[0]: -vd: -v is set by spec.verbosity; set that field instead; -d daemonizes",
			"-C -m2048":             "spec.extraArgs[1]: -m2048: -m is set by spec.memoryLimitMB; set that field instead",
			"-p 1":                  "spec.extraArgs[0]: -p: -p is set by spec.port",
			"--memory-l=1":          "spec.extraArgs[0]: --memory-l=1: --memory-limit is set by spec.memoryLimitMB",
			"--mem=1":               "spec.extraArgs[0]: --mem=1: --mem is not a memcached option, or names more than one",
			"--dis":                 "spec.extraArgs[0]: --dis: --dis is not a memcached option, or names more than one",
			"--disable-cas=1":       "spec.extraArgs[0]: --disable-cas=1: --disable-cas takes no value",
			"-o":                    "spec.extraArgs[0]: -o: needs a value",
			"modern":                "spec.extraArgs[0]: modern: is not an option",
			"-R -5":                 "spec.extraArgs[1]: -5: a separate option value may not start with '-'",
			"-R0":                   "spec.extraArgs[0]: -R0: -R takes a whole number above 0",
			"-o modern,ext_path=/x": "spec.extraArgs[0]: -o: -o takes memcached 1.6's sub-options that run in the fleet's pod (no ssl_*, ext_* or slab_chunk_max): ext_path=/x is not one",
			"-D -":                  "spec.extraArgs[1]: -: a separate option value may not start with '-'", // stricter than the webhook
		} {
			Expect(k8sClient.Create(ctx, fleet(free, "args", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = strings.Fields(args) }), client.DryRunAll)).
				To(invalid(want), args)
		}
		Expect(k8sClient.Create(ctx, fleet(free, "binary", func(s *cachev1alpha1.MemcachedSpec) {
			s.ExtraArgs = []string{"-B", "binary"}
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}}
		}), client.DryRunAll)).To(invalid("spec.extraArgs[0]: -B: -B must be ascii: spec.auth is memcached's ASCII authentication"))
		Expect(k8sClient.Create(ctx, fleet(free, "dash", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-D-"} }), client.DryRunAll)).
			To(Succeed(), "the attached spelling")

		By("an object stored while the rules were not bound (by this release nor by another the suite installed)")
		bindings := &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
		Expect(k8sClient.List(ctx, bindings)).To(Succeed())
		var unbound []admissionregistrationv1.ValidatingAdmissionPolicyBinding
		for _, b := range bindings.Items {
			if strings.HasSuffix(b.Spec.PolicyName, "-memcached-operator-rules") {
				Expect(k8sClient.Delete(ctx, &b)).To(Succeed())
				b.ResourceVersion, b.UID = "", ""
				unbound = append(unbound, b)
			}
		}
		Expect(unbound).NotTo(BeEmpty())
		old := fleet(free, "old", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-d"} })
		Eventually(func() error { return k8sClient.Create(ctx, old) }).WithTimeout(verbWait).Should(Succeed())
		for i := range unbound {
			Expect(k8sClient.Create(ctx, &unbound[i])).To(Succeed())
		}
		Eventually(func() error {
			return k8sClient.Create(ctx, fleet(free, "daemon", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-d"} }), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("spec.extraArgs"))

		Expect(k8sClient.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`)))).To(Succeed())
		Expect(k8sClient.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxConnections":2048}}`)))).
			To(Succeed(), "an edit elsewhere: the rule it already broke is not held against it")
		Expect(k8sClient.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"podLabels":{"app.kubernetes.io/name":"x"}}}`)))).
			To(invalid("spec.podLabels"), "breaking another rule is refused")
		Expect(k8sClient.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"extraArgs":["-M"]}}`)))).To(Succeed(), "and the fix")
		Expect(k8sClient.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"extraArgs":["-d"]}}`)))).
			To(invalid("spec.extraArgs"), "once fixed, the rule holds")
	})

	It("refuses every write in a namespace whose maxSize is no number, until it is fixed", func(ctx SpecContext) {
		const broken = "limits-broken"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: broken}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: broken, Name: "limits",
			Labels: map[string]string{"memcached.cache.example.com/limits": "true"}}, Data: map[string]string{"maxSize": "lots"}})).To(Succeed())
		Eventually(func() error { return k8sClient.Create(ctx, fleet(broken, "any", nil), client.DryRunAll) }).WithTimeout(verbWait).Should(invalid("resulted in error"))
		Expect(k8sClient.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: broken, Name: "limits"}},
			client.RawPatch(types.MergePatchType, []byte(`{"data":{"maxSize":"5"}}`)))).To(Succeed())
		Eventually(func() error { return k8sClient.Create(ctx, fleet(broken, "any", nil), client.DryRunAll) }).WithTimeout(verbWait).Should(Succeed())
	})
})
