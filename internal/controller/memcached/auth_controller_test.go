package memcached_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// authPassword is in the test Secret only: the specs check that it never
// reaches the Deployment.
const authPassword = "envtest-s3cret"

func authSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		StringData: map[string]string{"auth": "app:" + authPassword + "\n"}}
}

func withAuth(mc *cachev1alpha1.Memcached, secret string) *cachev1alpha1.Memcached {
	mc.Spec.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: secret}}
	return mc
}

var _ = Describe("A fleet with spec.auth", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("waits for its missing Secret without a Deployment, then builds one that mounts it", func() {
		mc := withAuth(sample(ns, 2), "users")
		Expect(k8s.Create(ctx, mc)).To(Succeed())

		By("reporting the missing Secret by name, and building no Deployment (its pods could never start)")
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing), HaveField("Message", ContainSubstring("users"))))
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing))
		Expect(condition(mc, cachev1alpha1.ConditionAvailable)(Default)).To(HaveField("Status", metav1.ConditionFalse))
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &corev1.Service{}).Should(Succeed(), "the other objects do not wait")
		Consistently(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &appsv1.Deployment{})) }).Should(BeTrue())

		By("building the Deployment once the Secret is created, which requeues the fleet")
		Expect(k8s.Create(ctx, authSecret(ns, "users"))).To(Succeed())
		Eventually(func(g Gomega) {
			pod := deploymentOf(mc)(g).Spec.Template.Spec
			g.Expect(pod.Volumes).To(ConsistOf(HaveField("Secret.SecretName", "users")))
			g.Expect(*pod.ShareProcessNamespace).To(BeTrue())
			g.Expect(pod.Containers).To(ConsistOf(HaveField("Name", "memcached"), HaveField("Name", "auth-reloader")))
			g.Expect(pod.Containers[0].Args).To(ContainElements("-Y", "/etc/memcached/auth/auth-file"))
		}).Should(Succeed())
		raw, err := json.Marshal(deploymentOf(mc)(Default))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(authPassword), "the password stays in the Secret")
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(HaveField("Status", metav1.ConditionTrue))
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("removing the condition when auth is turned off")
		patchSpec(mc, `{"auth":null}`)
		Eventually(func(g Gomega) []metav1.Condition { return statusOf(mc)(g).Conditions }).ShouldNot(
			ContainElement(HaveField("Type", cachev1alpha1.ConditionAuthReady)))
		Eventually(func(g Gomega) []corev1.Volume { return deploymentOf(mc)(g).Spec.Template.Spec.Volumes }).Should(BeEmpty())
	})

	It("leaves a running fleet's Deployment alone while its Secret is gone, and resumes when it is back", func() {
		Expect(k8s.Create(ctx, authSecret(ns, "users"))).To(Succeed())
		mc := withAuth(sample(ns, 2), "users")
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("deleting the Secret: the fleet keeps serving and says why it is not Ready")
		Expect(k8s.Delete(ctx, authSecret(ns, "users"))).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing))
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing))
		Expect(condition(mc, cachev1alpha1.ConditionAvailable)(Default)).To(HaveField("Status", metav1.ConditionTrue))
		before := deploymentOf(mc)(Default)

		By("not changing the Deployment meanwhile, even for a resize")
		patchSpec(mc, `{"size":3}`)
		Consistently(func(g Gomega) string { return deploymentOf(mc)(g).ResourceVersion }).Should(Equal(before.ResourceVersion))

		By("applying the resize once the Secret is back")
		Expect(k8s.Create(ctx, authSecret(ns, "users"))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(HaveField("Status", metav1.ConditionTrue))
	})

	It("is requeued only by its own Secret: another Secret of the namespace changes nothing", func() {
		mc := withAuth(sample(ns, 1), "users")
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing))
		Expect(k8s.Create(ctx, authSecret(ns, "other"))).To(Succeed())
		Consistently(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &appsv1.Deployment{})) }).Should(BeTrue())
	})
})
