package memcached_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
)

// withFleetTLS turns TLS on with the Issuer "ca".
func withFleetTLS(mc *cachev1alpha1.Memcached) *cachev1alpha1.Memcached {
	mc.Spec.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}}
	return mc
}

// certificateOf reads the fleet's Certificate through the uncached client.
func certificateOf(mc *cachev1alpha1.Memcached) func(Gomega) *unstructured.Unstructured {
	return func(g Gomega) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(desired.CertificateGVK)
		g.Expect(k8s.Get(ctx, key(mc), u)).To(Succeed())
		return u
	}
}

func nestedString(u *unstructured.Unstructured, fields ...string) string {
	v, _, _ := unstructured.NestedString(u.Object, fields...)
	return v
}

func nestedStrings(u *unstructured.Unstructured, fields ...string) []string {
	v, _, _ := unstructured.NestedStringSlice(u.Object, fields...)
	return v
}

// setCertificateReady stands in for cert-manager, which envtest does not
// run: it writes the Certificate's Ready condition for its generation.
func setCertificateReady(mc *cachev1alpha1.Memcached, ready bool) {
	GinkgoHelper()
	u := certificateOf(mc)(Default)
	status, reason, msg := "True", "Ready", "Certificate is up to date and has not expired"
	if !ready {
		status, reason, msg = "False", "Issuing", "Issuing certificate as Secret does not exist"
	}
	patch := map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": status, "reason": reason, "message": msg,
		"observedGeneration": u.GetGeneration(), "lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z"),
	}}}}
	raw, err := json.Marshal(patch)
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, raw))).To(Succeed())
}

var _ = Describe("A fleet with spec.tls", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("owns a Certificate, waits for it to be Ready before building the Deployment, and deletes it when TLS is turned off", func() {
		mc := withFleetTLS(sample(ns, 2))
		Expect(k8s.Create(ctx, mc)).To(Succeed())

		By("creating the Certificate, owned by the fleet, for the Service's names, into <name>-tls")
		Eventually(func(g Gomega) {
			c := certificateOf(mc)(g)
			g.Expect(c.GetOwnerReferences()).To(ConsistOf(And(HaveField("UID", mc.UID), HaveField("Controller", HaveValue(BeTrue())))))
			g.Expect(nestedString(c, "spec", "secretName")).To(Equal(mc.Name + "-tls"))
			g.Expect(nestedStrings(c, "spec", "dnsNames")).To(ContainElements(mc.Name+"."+ns+".svc", "*."+mc.Name+"."+ns+".svc.cluster.local"))
			g.Expect(nestedString(c, "spec", "issuerRef", "kind")).To(Equal("Issuer"))
		}).Should(Succeed())

		By("reporting CertificateReady False, not Available, and building no Deployment while it is not Ready")
		Eventually(condition(mc, cachev1alpha1.ConditionCertificateReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", cachev1alpha1.ReasonCertificateNotReady)))
		Expect(condition(mc, cachev1alpha1.ConditionAvailable)(Default)).To(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", cachev1alpha1.ReasonCertificateNotReady)))
		setCertificateReady(mc, false)
		Consistently(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &appsv1.Deployment{})) }).Should(BeTrue())

		By("building the Deployment with TLS once cert-manager reports the Certificate Ready (its status change requeues the fleet through the metadata watch)")
		setCertificateReady(mc, true)
		Eventually(condition(mc, cachev1alpha1.ConditionCertificateReady)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", cachev1alpha1.ReasonCertificateIssued)))
		Eventually(func(g Gomega) {
			pod := deploymentOf(mc)(g).Spec.Template.Spec
			g.Expect(pod.Volumes).To(ConsistOf(HaveField("Secret.SecretName", mc.Name+"-tls")))
			g.Expect(pod.Containers).To(ConsistOf(HaveField("Name", "memcached"), HaveField("Name", "auth-reloader")))
			g.Expect(pod.Containers[0].Args).To(ContainElements("-Z", "*:11211,notls:127.0.0.1:11299"))
		}).Should(Succeed())
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionAvailable)).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("a renewal's Ready=False (another issuer) makes the fleet not Available and holds the Deployment")
		setCertificateReady(mc, false)
		Eventually(condition(mc, cachev1alpha1.ConditionAvailable)).Should(HaveField("Reason", cachev1alpha1.ReasonCertificateNotReady))
		before := deploymentOf(mc)(Default).ResourceVersion
		patchSpec(mc, `{"size":3}`)
		Consistently(func(g Gomega) string { return deploymentOf(mc)(g).ResourceVersion }).Should(Equal(before))
		setCertificateReady(mc, true)
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))

		By("deleting the Certificate and the condition when TLS is turned off; the pods lose TLS")
		patchSpec(mc, `{"tls":{"enabled":false}}`)
		Eventually(func() bool {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(desired.CertificateGVK)
			return apierrors.IsNotFound(k8s.Get(ctx, key(mc), u))
		}).Should(BeTrue())
		Eventually(func(g Gomega) []metav1.Condition { return statusOf(mc)(g).Conditions }).ShouldNot(
			ContainElement(HaveField("Type", cachev1alpha1.ConditionCertificateReady)))
		Eventually(func(g Gomega) []string { return deploymentOf(mc)(g).Spec.Template.Spec.Containers[0].Args }).ShouldNot(ContainElement("-Z"))
	})

	It("puts back a Certificate edited by hand, and leaves one it does not own alone", func() {
		mc := withFleetTLS(sample(ns, 1))
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(certificateOf(mc)).Should(Not(BeNil()))
		c := certificateOf(mc)(Default)
		Expect(k8s.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"dnsNames":["evil.example.com"]}}`)))).To(Succeed())
		// The edit requeues the fleet through the watch on Certificates.
		Eventually(func(g Gomega) []string {
			return nestedStrings(certificateOf(mc)(g), "spec", "dnsNames")
		}).Should(ContainElement(mc.Name + "." + ns + ".svc"))

		other := withFleetTLS(sample(ns, 1))
		other.Name = "taken"
		foreign := &unstructured.Unstructured{}
		foreign.SetGroupVersionKind(desired.CertificateGVK)
		foreign.SetNamespace(ns)
		foreign.SetName("taken")
		Expect(unstructured.SetNestedMap(foreign.Object, map[string]any{"secretName": "someone-elses", "dnsNames": []any{"x.example.com"},
			"issuerRef": map[string]any{"name": "ca"}}, "spec")).To(Succeed())
		Expect(k8s.Create(ctx, foreign)).To(Succeed())
		Expect(k8s.Create(ctx, other)).To(Succeed())
		Eventually(condition(other, cachev1alpha1.ConditionDegraded)).Should(HaveField("Reason", cachev1alpha1.ReasonNameConflict))
		Expect(nestedString(certificateOf(other)(Default), "spec", "secretName")).To(Equal("someone-elses"))
	})
})
