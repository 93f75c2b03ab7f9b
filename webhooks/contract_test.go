package webhooks_test

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/test/chartrender"
	"github.com/example/memcached-operator/test/specgen"
)

// storeBypassingWebhooks stores mc as an object admitted before a rule
// tightened (or while the webhooks were off) would be: the validating
// webhook configuration is taken away for the create and put back after.
func storeBypassingWebhooks(mc *cachev1alpha1.Memcached) {
	GinkgoHelper()
	vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	Expect(k8s.List(ctx, vwcs)).To(Succeed())
	Expect(vwcs.Items).To(HaveLen(1))
	vwc := vwcs.Items[0].DeepCopy()
	Expect(k8s.Delete(ctx, vwc)).To(Succeed())
	Eventually(func() error { return k8s.Create(ctx, mc) }).Should(Succeed())
	vwc.ResourceVersion, vwc.UID = "", ""
	Expect(k8s.Create(ctx, vwc)).To(Succeed())
	// The API server's webhook configuration cache follows the new object.
	Eventually(func() error {
		return k8s.Create(ctx, memcachedIn(mc.Namespace, func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-d"} }), client.DryRunAll)
	}).Should(MatchError(ContainSubstring("daemonizes")))
}

var _ = Describe("Validating webhook on objects that already exist", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("lets a fleet above a lowered --max-size scale down, not up, by patch and by kubectl scale", func() {
		mc := memcachedIn(ns, func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](maxSize * 5) })
		storeBypassingWebhooks(mc)

		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":40}}`)))).To(Succeed())
		scale := func(n int32) error {
			return k8s.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}))
		}
		Expect(scale(30)).To(Succeed())
		Expect(invalidFields(scale(35))).To(ConsistOf("spec.replicas"))
		err := k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":31}}`)))
		Expect(invalidFields(err)).To(ConsistOf("spec.size"))
		Expect(scale(maxSize)).To(Succeed())
	})

	It("never blocks a label, a finalizer's removal or a delete of an object a rule now refuses, and does not warn about them", func() {
		mc := memcachedIn(ns, func(s *cachev1alpha1.MemcachedSpec) { s.ExtraArgs = []string{"-d"}; s.Size = ptr.To[int32](1) })
		mc.Finalizers = []string{"example.com/hold"}
		storeBypassingWebhooks(mc)

		warnings.take()
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`)))).To(Succeed())
		Expect(warnings.take()).To(BeEmpty(), "a label changes nothing worth a warning")
		By("a spec edit elsewhere is still allowed: only what changed is judged")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxConnections":2048}}`)))).To(Succeed())
		err := k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"extraArgs":["-u","root"]}}`)))
		Expect(invalidFields(err)).To(ConsistOf("spec.extraArgs[0]"))

		Expect(k8s.Delete(ctx, mc)).To(Succeed())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)) }).Should(BeTrue())
	})
})

// The key property of the admission contract: whatever the whole admission
// chain (schema, CEL, defaulting and validating webhooks) accepts, the
// controller agrees with and builds into objects the API server accepts, and
// the real memcached starts; and the same without the webhooks, with only
// the schema, its CEL and the chart's admission policies, as while the
// operator is down.
var _ = Describe("Every Memcached the admission chain accepts", func() {
	It("passes the controller's own checks and builds a Deployment, Service, PodDisruptionBudget and NetworkPolicy the API server accepts", func() {
		admittedIsBuildable(true)
	})
	It("does so with the webhooks off: the schema, CEL and the chart's ValidatingAdmissionPolicies alone", func() {
		withoutWebhooks()
		admittedIsBuildable(false)
	})
})

// admittedIsBuildable draws specs, sends each to the API server, and holds
// every admitted one to the controller's rules, the builders and the real
// memcached. Without the webhooks nothing defaults a spec: the controller
// resolves it as it does any stored object.
func admittedIsBuildable(webhooksOn bool) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("PROPERTY_SPECS")); err == nil && v > 0 {
		n = v
	}
	seed := uint64(GinkgoRandomSeed())
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ns := newNamespace()
	cfg := policy.Config{DefaultImage: defaultImage, ExporterImage: exporterImage}
	real := newRealMemcached()
	var refusedByMemcached []string
	accepted, rejected, built, policies, authed, certs, started, unchecked := 0, 0, 0, 0, 0, 0, 0, 0
	stable, warm := 0, 0
	// Each side of the contract must be exercised a tenth of n times, each
	// optional builder a hundredth. A seed that falls short draws more
	// specs, up to 4n; a generator that stopped producing one of them
	// fails below, whatever the seed.
	covered := func() bool {
		return accepted > n/10 && rejected > n/10 && policies > n/100 && authed > n/100 && certs > n/100 && stable > n/100 && warm > n/200
	}
	i := 0
	for ; i < n || (!covered() && i < 4*n); i++ {
		mc := specgen.Random(r, 160)
		mc.Namespace = ns
		desc := func() string {
			return "spec " + strconv.Itoa(i) + " (seed " + strconv.FormatUint(seed, 10) + "): " + mc.Name
		}
		err := k8s.Create(ctx, mc, client.DryRunAll)
		if err != nil {
			Expect(apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)).To(BeTrue(), "%s: refused for the wrong reason: %v", desc(), err)
			rejected++
			continue
		}
		accepted++
		Expect(policy.Validate(mc)).To(BeEmpty(), "%s: admitted, but the controller would refuse it", desc())
		Expect(policy.ValidateResolved(policy.Resolve(&mc.Spec, cfg))).To(BeEmpty(), "%s: admitted, but the controller could not complete it", desc())
		Expect(policy.ValidateSize(field.NewPath("spec", "size"), mc.Spec.Size, nil, policy.Limits{MaxSize: maxSize})).To(BeEmpty(), desc())
		if mc.UID == "" {
			mc.UID = types.UID("00000000-0000-0000-0000-000000000001")
		}
		spec := policy.Resolve(&mc.Spec, cfg)
		// The pod's command line, run by the real memcached.
		switch ok, why := real.starts(spec); {
		case !real.checks(spec):
			unchecked++
		case ok:
			started++
		default:
			refusedByMemcached = append(refusedByMemcached, desc()+": "+why)
		}
		Expect(k8s.Apply(ctx, desired.Deployment(mc, spec), client.FieldOwner(apply.FieldOwner), client.DryRunAll)).To(Succeed(), "%s: Deployment %+v", desc(), mc.Spec)
		if ptr.Deref(spec.Workload, "") == cachev1alpha1.WorkloadStatefulSet {
			Expect(k8s.Apply(ctx, desired.StatefulSet(mc, spec), client.FieldOwner(apply.FieldOwner), client.DryRunAll)).To(Succeed(), "%s: StatefulSet %+v", desc(), mc.Spec)
			built++
			stable++
			if policy.WarmRestartEnabled(spec) {
				warm++
			}
		}
		Expect(k8s.Apply(ctx, desired.Service(mc, spec), client.FieldOwner(apply.FieldOwner), client.DryRunAll)).To(Succeed(), "%s: Service", desc())
		built += 2
		if mc.Spec.Auth != nil {
			// The Deployment mounting the auth Secret, with the reloader.
			authed++
		}
		if policy.TLSEnabled(spec) {
			// cert-manager's CRD (installed by the suite) holds the
			// Certificate to its schema: issuer kind, names, usages.
			Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired.Certificate(mc, spec)), client.FieldOwner(apply.FieldOwner), client.DryRunAll)).To(Succeed(), "%s: Certificate", desc())
			built++
			certs++
		}
		if pdb := desired.PodDisruptionBudget(mc, spec); pdb != nil {
			Expect(k8s.Apply(ctx, pdb, client.FieldOwner(apply.FieldOwner), client.DryRunAll)).To(Succeed(), "%s: PodDisruptionBudget", desc())
			built++
		}
		if np := desired.NetworkPolicy(mc, spec); np != nil {
			Expect(k8s.Apply(ctx, np, client.FieldOwner(apply.FieldOwner), client.DryRunAll)).To(Succeed(), "%s: NetworkPolicy %+v", desc(), mc.Spec.NetworkPolicy)
			built++
			policies++
		}
	}
	GinkgoWriter.Printf("generated specs: %d, admitted: %d, refused: %d, built objects dry-run: %d (NetworkPolicies: %d, Deployments with auth: %d, Certificates: %d), started by the real memcached: %d, not started (maxConnections above the open-file limit %d): %d\n", i, accepted, rejected, built, policies, authed, certs, started, real.openFiles, unchecked)
	AddReportEntry("admission property, webhooks "+map[bool]string{true: "on", false: "off"}[webhooksOn], map[string]int{"specs": i, "admitted": accepted, "refused": rejected, "objects dry-run": built, "network policies": policies, "with auth": authed, "certificates": certs, "stable": stable, "warm restarts": warm, "started by memcached": started, "not started": unchecked})
	Expect(refusedByMemcached).To(BeEmpty(), "admitted, but the real memcached does not start the pod's command line")
	Expect(started).To(BeNumerically(">", n/20), "and the real memcached")
	Expect(accepted).To(BeNumerically(">", n/10), "the generator must exercise the accepting side too")
	Expect(rejected).To(BeNumerically(">", n/10), "and the refusing side")
	Expect(policies).To(BeNumerically(">", n/100), "and the NetworkPolicy builder")
	Expect(authed).To(BeNumerically(">", n/100), "and the auth volume and sidecar")
	Expect(certs).To(BeNumerically(">", n/100), "and the Certificate builder")
}

// withoutWebhooks takes both webhook configurations away and installs the
// chart's ValidatingAdmissionPolicies (rules and limits, with the suite's
// --max-size) until the spec ends: admission as the API server does it alone.
func withoutWebhooks() {
	GinkgoHelper()
	const release, namespace = "memcached-operator", "memcached-operator-system"
	Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))).To(Succeed())
	probe := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}, Spec: cachev1alpha1.MemcachedSpec{ExtraArgs: []string{"-d"}}}
	// Registered first, so it runs last: the API server takes up webhook
	// configurations and policies asynchronously, and the next spec must
	// meet the webhooks again, not the policies.
	DeferCleanup(func() {
		Eventually(func(g Gomega) {
			err := k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			g.Expect(err).To(MatchError(ContainSubstring("admission webhook")), "the webhooks are back")
			g.Expect(err).NotTo(MatchError(ContainSubstring("ValidatingAdmissionPolicy")), "and the policies gone")
		}).Should(Succeed())
	})
	objs, err := chartrender.Render(release, namespace, map[string]any{"operator": map[string]any{"maxSize": maxSize}})
	Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		kind := o.GetKind()
		if !strings.HasPrefix(kind, "ValidatingAdmissionPolicy") {
			continue
		}
		Expect(k8s.Create(ctx, o)).To(Succeed(), kind+" "+o.GetName())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, o))).To(Succeed()) })
	}
	mwcs := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	Expect(k8s.List(ctx, mwcs)).To(Succeed())
	vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	Expect(k8s.List(ctx, vwcs)).To(Succeed())
	for _, obj := range []client.Object{&mwcs.Items[0], &vwcs.Items[0]} {
		Expect(k8s.Delete(ctx, obj)).To(Succeed())
		DeferCleanup(func() {
			again := obj.DeepCopyObject().(client.Object)
			again.SetResourceVersion("")
			again.SetUID("")
			Expect(k8s.Create(ctx, again)).To(Succeed())
		})
	}
	Eventually(func(g Gomega) {
		err := k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		g.Expect(err).To(MatchError(ContainSubstring("ValidatingAdmissionPolicy")), "the policies are in force")
		g.Expect(err).NotTo(MatchError(ContainSubstring("admission webhook")), "and the webhooks gone")
	}).Should(Succeed())
}

// unreachableWebhooks points every webhook of both configurations at a
// closed loopback port until the spec ends, as if the operator were down.
func unreachableWebhooks() {
	GinkgoHelper()
	dead := "https://127.0.0.1:1/down"
	mwcs := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	Expect(k8s.List(ctx, mwcs)).To(Succeed())
	vwcs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	Expect(k8s.List(ctx, vwcs)).To(Succeed())
	// down points each of obj's webhooks (configs) at the closed port, and
	// puts obj back as it was when the spec ends.
	down := func(obj client.Object, configs []*admissionregistrationv1.WebhookClientConfig) {
		before := obj.DeepCopyObject().(client.Object)
		for _, c := range configs {
			*c = admissionregistrationv1.WebhookClientConfig{URL: &dead, CABundle: c.CABundle}
		}
		Expect(k8s.Update(ctx, obj)).To(Succeed())
		DeferCleanup(func() { restoreWebhooks(before) })
	}
	for i := range mwcs.Items {
		var configs []*admissionregistrationv1.WebhookClientConfig
		for j := range mwcs.Items[i].Webhooks {
			configs = append(configs, &mwcs.Items[i].Webhooks[j].ClientConfig)
		}
		down(&mwcs.Items[i], configs)
	}
	for i := range vwcs.Items {
		var configs []*admissionregistrationv1.WebhookClientConfig
		for j := range vwcs.Items[i].Webhooks {
			configs = append(configs, &vwcs.Items[i].Webhooks[j].ClientConfig)
		}
		down(&vwcs.Items[i], configs)
	}
}

// restoreWebhooks puts a configuration's webhooks back as they were.
func restoreWebhooks(before client.Object) {
	GinkgoHelper()
	Eventually(func() error {
		cur := before.DeepCopyObject().(client.Object)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(before), cur); err != nil {
			return err
		}
		restored := before.DeepCopyObject().(client.Object)
		restored.SetResourceVersion(cur.GetResourceVersion())
		return k8s.Update(ctx, restored)
	}).Should(Succeed())
}

var _ = Describe("What cannot break a rule", func() {
	It("never waits on the webhooks: with them unreachable, labels, finalizers, a shrink and a delete go through, and a spec change does not", func() {
		ns := newNamespace()
		mc := memcachedIn(ns, func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](4) })
		mc.Finalizers = []string{"example.com/hold"}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		unreachableWebhooks()
		merge := func(patch string) error {
			return k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		Eventually(func() error { return merge(`{"spec":{"maxConnections":2048}}`) }).Should(MatchError(ContainSubstring("failed calling webhook")),
			"a spec change waits on the webhooks, which are down")
		Expect(merge(`{"metadata":{"labels":{"team":"a"},"annotations":{"note":"x"}}}`)).To(Succeed())
		scale := &autoscalingv1.Scale{}
		Expect(k8s.SubResource("scale").Get(ctx, mc, scale)).To(Succeed())
		scale.Spec.Replicas = 2
		Expect(k8s.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))).To(Succeed(), "a shrink cannot pass --max-size")
		scale.Spec.Replicas = 3
		Expect(k8s.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))).To(MatchError(ContainSubstring("failed calling webhook")), "growth can")
		Expect(k8s.Delete(ctx, mc)).To(Succeed())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)))).To(Succeed(), "the finalizer of an object being deleted")
		Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(mc), mc)) }).Should(BeTrue())
	})
})
