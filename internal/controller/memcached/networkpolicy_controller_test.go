package memcached_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

func networkPolicyOf(mc *cachev1alpha1.Memcached) func(Gomega) *networkingv1.NetworkPolicy {
	return func(g Gomega) *networkingv1.NetworkPolicy {
		np := &networkingv1.NetworkPolicy{}
		g.Expect(k8s.Get(ctx, key(mc), np)).To(Succeed())
		return np
	}
}

func patchSpec(mc *cachev1alpha1.Memcached, patch string) {
	GinkgoHelper()
	Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":`+patch+`}`)))).To(Succeed())
}

var _ = Describe("A fleet's NetworkPolicy", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("is created when enabled, follows the peers, is restored after an edit, and is deleted when disabled", func() {
		mc := sample(ns, 2)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		Consistently(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &networkingv1.NetworkPolicy{})) }).Should(BeTrue(), "off by default")

		patchSpec(mc, `{"networkPolicy":{"enabled":true}}`)
		Eventually(func(g Gomega) {
			np := networkPolicyOf(mc)(g)
			g.Expect(metav1.IsControlledBy(np, mc)).To(BeTrue())
			g.Expect(np.Spec.Ingress).To(HaveLen(1))
			g.Expect(np.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}), "the namespace's own pods")
		}).Should(Succeed())

		By("following a change of peers")
		patchSpec(mc, `{"networkPolicy":{"from":[{"podSelector":{"matchLabels":{"role":"web"}}}]}}`)
		Eventually(func(g Gomega) []networkingv1.NetworkPolicyPeer { return networkPolicyOf(mc)(g).Spec.Ingress[0].From }).Should(Equal(
			[]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}}}}))

		By("taking back a hand edit that opens the fleet to everyone")
		np := networkPolicyOf(mc)(Default)
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
		Expect(k8s.Update(ctx, np)).To(Succeed())
		Eventually(func(g Gomega) []networkingv1.NetworkPolicyIngressRule { return networkPolicyOf(mc)(g).Spec.Ingress }).Should(
			ConsistOf(HaveField("From", HaveLen(1))))

		By("deleting it when disabled")
		patchSpec(mc, `{"networkPolicy":{"enabled":false}}`)
		Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &networkingv1.NetworkPolicy{})) }).Should(BeTrue())
	})

	It("never takes over or deletes a NetworkPolicy of the same name it does not control", func() {
		theirs := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample", Namespace: ns, Labels: map[string]string{"app": "mine"}},
			Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		}
		Expect(k8s.Create(ctx, theirs)).To(Succeed())
		mc := sample(ns, 2)
		mc.Spec.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(And(
			HaveField("Reason", cachev1alpha1.ReasonNameConflict), HaveField("Message", ContainSubstring("NetworkPolicy "+ns+"/memcached-sample"))))
		Eventually(replicasOf(mc)).Should(Equal(int32(2)), "the other phases still run")

		By("disabling it leaves the user's policy in place")
		patchSpec(mc, `{"networkPolicy":{"enabled":false}}`)
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		cur := &networkingv1.NetworkPolicy{}
		Expect(k8s.Get(ctx, key(theirs), cur)).To(Succeed())
		Expect(cur.OwnerReferences).To(BeEmpty())
		Expect(cur.Spec.Ingress).To(BeEmpty())
		Expect(cur.Labels).To(Equal(map[string]string{"app": "mine"}))
	})
})
