package chart_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/installcheck"
)

// limitsAnnotation prefixes a Namespace's annotations that cap its fleets.
const limitsAnnotation = "memcached.cache.example.com/"

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

	// install applies the release's limits policy as `helm install` or
	// `helm upgrade --set operator.maxSize=...` would.
	install := func(ctx SpecContext, maxSize int) {
		vals := ciValues("default")
		vals["operator"] = map[string]any{"maxSize": maxSize}
		for _, obj := range renderSet(rel, ns, vals) {
			if strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") && !warmPodsPolicy(obj) {
				Expect(applyObject(ctx, k8sClient, obj)).To(Succeed(), obj.GetKind()+" "+obj.GetName())
			}
		}
	}
	teamCaps := map[string]string{
		limitsAnnotation + "max-size":               "3",
		limitsAnnotation + "allowed-image-prefixes": "registry.example.com/, mirror.example.com/memcached:",
		limitsAnnotation + "require-auth":           "true",
	}

	BeforeAll(func(ctx SpecContext) {
		for _, n := range []string{ns, capped, free} {
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}))).To(Succeed())
		}
		install(ctx, 8)
		Expect(k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: capped, Annotations: teamCaps}}, client.Merge)).To(Succeed())
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

		By("a fleet stored above the cap (before an upgrade lowered it) keeps its size and may shrink, not grow")
		big := fleet(free, "big", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](8) })
		Expect(k8sClient.Create(ctx, big)).To(Succeed())
		install(ctx, 4)
		Eventually(func() error {
			return k8sClient.Patch(ctx, big, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":9}}`)), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("less than or equal to 4"))
		Expect(k8sClient.Patch(ctx, big, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxConnections":2048}}`)))).To(Succeed(), "an edit that keeps the size")
		Expect(k8sClient.Patch(ctx, big, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":6}}`)))).To(Succeed(), "a shrink still above the cap")
		install(ctx, 8)
		Eventually(func() error {
			return k8sClient.Patch(ctx, big, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":9}}`)), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("less than or equal to 8"))
	})

	It("holds a namespace's own caps: a lower size, image registries, auth required", func(ctx SpecContext) {
		auth := func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}}
		}
		// The API server reads the Namespace from its cache: the annotations
		// may reach it a moment after they were written.
		Eventually(func() error {
			return k8sClient.Create(ctx, fleet(capped, "four", func(s *cachev1alpha1.MemcachedSpec) { auth(s); s.Size = ptr.To[int32](4) }), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("must be less than or equal to 3, the memcached.cache.example.com/max-size annotation of namespace limits-capped"))
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
		By("the namespace's size cap holds on the scale subresource too")
		scaled := fleet(capped, "scaled", auth)
		Expect(k8sClient.Create(ctx, scaled)).To(Succeed())
		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(ctx, scaled, scale)).To(Succeed())
		scale.Spec.Replicas = 4
		Expect(k8sClient.SubResource("scale").Update(ctx, scaled, client.WithSubResourceBody(scale))).
			To(invalid("spec.replicas: Invalid value: 4: must be less than or equal to 3, the memcached.cache.example.com/max-size annotation of namespace limits-capped"))
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
		rebind := unbind(ctx, "-memcached-operator-rules")
		old := fleet(free, "old", func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-d"} })
		Eventually(func() error { return k8sClient.Create(ctx, old) }).WithTimeout(verbWait).Should(Succeed())
		rebind()
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

	It("refuses every create and change of the spec or the scale in a namespace whose max-size is no number, until it is fixed", func(ctx SpecContext) {
		const broken = "limits-broken"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: broken}})).To(Succeed())
		stored := fleet(broken, "stored", nil)
		Expect(k8sClient.Create(ctx, stored)).To(Succeed())
		Expect(k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: broken, Annotations: map[string]string{limitsAnnotation + "max-size": "lots"}}},
			client.Merge)).To(Succeed())
		Eventually(func() error { return k8sClient.Create(ctx, fleet(broken, "any", nil), client.DryRunAll) }).WithTimeout(verbWait).
			Should(invalid("namespace limits-broken: annotation memcached.cache.example.com/max-size is not a whole number: lots"))
		Expect(k8sClient.Patch(ctx, stored, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":1}}`)))).To(invalid("is not a whole number"), "a spec change")
		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(ctx, stored, scale)).To(Succeed())
		scale.Spec.Replicas = 1
		Expect(k8sClient.SubResource("scale").Update(ctx, stored, client.WithSubResourceBody(scale))).To(invalid("is not a whole number"), "a scale")
		Expect(k8sClient.Patch(ctx, stored, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"},"finalizers":null}}`)))).
			To(Succeed(), "a label or finalizer change is not judged, so a fleet can still be deleted")
		for _, spelling := range []string{"-1", "+2", "2.0", " 2", "1e3", "0x10", "1234567890"} {
			Expect(k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: broken, Annotations: map[string]string{limitsAnnotation + "max-size": spelling}}},
				client.Merge)).To(Succeed())
			Eventually(func() error { return k8sClient.Create(ctx, fleet(broken, "any", nil), client.DryRunAll) }).WithTimeout(verbWait).
				Should(invalid("is not a whole number: "+spelling), spelling)
		}
		Expect(k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: broken, Annotations: map[string]string{limitsAnnotation + "max-size": "5"}}},
			client.Merge)).To(Succeed())
		Eventually(func() error { return k8sClient.Create(ctx, fleet(broken, "any", nil), client.DryRunAll) }).WithTimeout(verbWait).Should(Succeed())
	})

	It("cannot be lifted by the namespace's own admins and editors, only by who may update the Namespace", func(ctx SpecContext) {
		// envtest runs no controller manager, so the built-in admin and edit
		// roles are aggregated here as its ClusterRole aggregation would (edit
		// is itself a part of admin, view of edit).
		var aggregated func(name string) []rbacv1.PolicyRule
		aggregated = func(name string) []rbacv1.PolicyRule {
			role := &rbacv1.ClusterRole{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, role)).To(Succeed())
			Expect(role.AggregationRule).NotTo(BeNil(), name)
			var rules []rbacv1.PolicyRule
			for _, sel := range role.AggregationRule.ClusterRoleSelectors {
				parts := &rbacv1.ClusterRoleList{}
				Expect(k8sClient.List(ctx, parts, client.MatchingLabels(sel.MatchLabels))).To(Succeed())
				for _, p := range parts.Items {
					if p.AggregationRule != nil {
						rules = append(rules, aggregated(p.Name)...)
					} else {
						rules = append(rules, p.Rules...)
					}
				}
			}
			Expect(rules).NotTo(BeEmpty(), name)
			return rules
		}
		for role, rules := range map[string][]rbacv1.PolicyRule{
			"admin": aggregated("admin"),
			"edit":  aggregated("edit"),
			"owner": {{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
		} {
			name := "limits-tenant-" + role
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: capped, Name: name}}))).To(Succeed())
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: capped, Name: name}, Rules: rules}))).To(Succeed())
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: capped, Name: name},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: capped, Name: name}}}))).To(Succeed())
			_, tenant := as(capped, name)
			// Proof the binding is in force: the tenant may write ConfigMaps here,
			// which is all it took to lift caps kept in a ConfigMap.
			Eventually(func() error {
				return tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: capped, Name: "tenant"}}, client.DryRunAll)
			}).WithTimeout(verbWait).Should(Succeed(), role)
			ns := &corev1.Namespace{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: capped}, ns)).To(Succeed())
			delete(ns.Annotations, limitsAnnotation+"max-size")
			lift := func() error { return tenant.Update(ctx, ns.DeepCopy(), client.DryRunAll) }
			if role == "owner" {
				Expect(lift()).To(Succeed(), "a Role that grants every resource grants the Namespace itself")
				continue
			}
			Expect(lift()).To(Satisfy(forbidden), role+": update")
			Expect(tenant.Patch(ctx, ns.DeepCopy(), client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"memcached.cache.example.com/max-size":null}}}`)), client.DryRunAll)).To(Satisfy(forbidden), role+": patch")
		}
	})

	It("holds a namespace's caps as they change, and after the policy was unbound and bound again (an uninstall and install)", func(ctx SpecContext) {
		const moving = "limits-moving"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moving,
			Annotations: map[string]string{limitsAnnotation + "max-size": "5"}}})).To(Succeed())
		six := func() error {
			return k8sClient.Create(ctx, fleet(moving, "six", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](6) }), client.DryRunAll)
		}
		Eventually(six).WithTimeout(verbWait).Should(invalid("must be less than or equal to 5, the memcached.cache.example.com/max-size annotation of namespace limits-moving"))

		By("unbinding every release's limits policy, as their uninstalls would, until the API server has dropped them")
		rebind := unbind(ctx, "-memcached-operator-limits")
		Eventually(six).WithTimeout(verbWait).Should(Succeed())
		rebind()
		Eventually(six).WithTimeout(verbWait).Should(invalid("less than or equal to 5"))

		By("caps changed after that hold")
		Expect(k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moving,
			Annotations: map[string]string{limitsAnnotation + "max-size": "2", limitsAnnotation + "require-tls": "true"}}}, client.Merge)).To(Succeed())
		Eventually(func() error {
			return k8sClient.Create(ctx, fleet(moving, "three", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) }), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("less than or equal to 2, the memcached.cache.example.com/max-size annotation of namespace limits-moving"))
		Expect(k8sClient.Create(ctx, fleet(moving, "plain", nil), client.DryRunAll)).To(invalid("namespace limits-moving requires spec.tls.enabled"))
		Expect(k8sClient.Create(ctx, fleet(moving, "tls", func(s *cachev1alpha1.MemcachedSpec) {
			s.TLS = &cachev1alpha1.TLSSpec{Enabled: true}
		}), client.DryRunAll)).NotTo(invalid("requires spec.tls.enabled"))
		By("and a namespace cap above --max-size does not lift it")
		Expect(k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moving}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"memcached.cache.example.com/max-size":"50","memcached.cache.example.com/require-tls":null}}}`)))).To(Succeed())
		Eventually(func() error {
			return k8sClient.Create(ctx, fleet(moving, "nine", func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](9) }), client.DryRunAll)
		}).WithTimeout(verbWait).Should(invalid("less than or equal to 8, the operator's --max-size"))
		Expect(six()).To(Succeed())
	})
})

// unbind deletes the bindings of every policy whose name ends in suffix, of
// every release the suite installed, and returns what creates them again.
func unbind(ctx context.Context, suffix string) (rebind func()) {
	GinkgoHelper()
	bindings := &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
	Expect(k8sClient.List(ctx, bindings)).To(Succeed())
	var unbound []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, b := range bindings.Items {
		if strings.HasSuffix(b.Spec.PolicyName, suffix) {
			Expect(k8sClient.Delete(ctx, &b)).To(Succeed())
			b.ResourceVersion, b.UID = "", ""
			unbound = append(unbound, b)
		}
	}
	Expect(unbound).NotTo(BeEmpty())
	return func() {
		GinkgoHelper()
		for i := range unbound {
			Expect(k8sClient.Create(ctx, &unbound[i])).To(Succeed())
		}
	}
}
