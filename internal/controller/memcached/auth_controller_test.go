package memcached_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
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

// kubeletPod stands in for the ReplicaSet and the kubelet: a pod of the
// fleet whose auth check waits for a missing Secret (missing), or which
// started and is ready.
func kubeletPod(mc *cachev1alpha1.Memcached, name string, missing bool) *corev1.Pod {
	GinkgoHelper()
	p := runningPod(mc.Namespace, name, "node-1", "zone-a")
	if missing {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "auth-check", Image: "op:1", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "users" not found`}}}}
		Expect(k8s.Status().Update(ctx, p)).To(Succeed())
	}
	return p
}

// secretStarted stands in for the kubelet once the Secret exists: the auth
// check ran and memcached is ready.
func secretStarted(p *corev1.Pod) {
	GinkgoHelper()
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "auth-check", Image: "op:1", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	Expect(k8s.Status().Update(ctx, p)).To(Succeed())
}

var _ = Describe("A fleet with spec.auth", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("is built at once, reports a missing Secret from the pod the kubelet holds back, and AuthReady once a pod starts", func() {
		mc := withAuth(sample(ns, 2), "users")
		Expect(k8s.Create(ctx, mc)).To(Succeed())

		By("building the Deployment without reading the Secret: its pods' auth check waits for it")
		Eventually(func(g Gomega) {
			pod := deploymentOf(mc)(g).Spec.Template.Spec
			g.Expect(pod.Volumes).To(ConsistOf(HaveField("Secret.SecretName", "users")))
			g.Expect(*pod.ShareProcessNamespace).To(BeTrue())
			g.Expect(pod.InitContainers).To(ConsistOf(HaveField("Name", "auth-check")))
			g.Expect(pod.Containers).To(ConsistOf(HaveField("Name", "memcached"), HaveField("Name", "auth-reloader")))
			g.Expect(pod.Containers[0].Args).To(ContainElements("-Y", "/etc/memcached/auth/auth-file"))
		}).Should(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(HaveField("Reason", cachev1alpha1.ReasonAuthSecretPending))

		By("reporting the kubelet's word on the pod it cannot start, by name")
		held := kubeletPod(mc, "memcached-sample-a", true)
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing),
			HaveField("Message", And(ContainSubstring(`memcached-sample-a: secret "users" not found`), ContainSubstring("create Secret users")))))
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing))
		Expect(condition(mc, cachev1alpha1.ConditionStalled)(Default)).To(HaveField("Status", metav1.ConditionTrue))
		raw, err := json.Marshal(deploymentOf(mc)(Default))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring(authPassword), "the password stays in the Secret")

		By("turning AuthReady True once the pod started with the Secret")
		secretStarted(held)
		kubeletPod(mc, "memcached-sample-b", false)
		setEndpoints(mc, ready("memcached-sample-a", "memcached-sample-b")...)
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("removing the condition when auth is turned off")
		patchSpec(mc, `{"auth":null}`)
		Eventually(func(g Gomega) []metav1.Condition { return statusOf(mc)(g).Conditions }).ShouldNot(
			ContainElement(HaveField("Type", cachev1alpha1.ConditionAuthReady)))
		Eventually(func(g Gomega) []corev1.Volume { return deploymentOf(mc)(g).Spec.Template.Spec.Volumes }).Should(BeEmpty())
	})

	It("keeps a running fleet's pods while its Secret is gone: a resize is applied, the new pod waits, and status says why", func() {
		Expect(k8s.Create(ctx, authSecret(ns, "users"))).To(Succeed())
		mc := withAuth(sample(ns, 2), "users")
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		kubeletPod(mc, "memcached-sample-a", false)
		kubeletPod(mc, "memcached-sample-b", false)
		setEndpoints(mc, ready("memcached-sample-a", "memcached-sample-b")...)
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("deleting the Secret and resizing: the Deployment takes the resize; a rollout would replace no pod before a new one is ready")
		Expect(k8s.Delete(ctx, authSecret(ns, "users"))).To(Succeed())
		patchSpec(mc, `{"size":3}`)
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))
		Expect(deploymentOf(mc)(Default).Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(BeZero())

		By("reporting the new pod the kubelet holds back, while no serving pod is lost")
		kubeletPod(mc, "memcached-sample-c", true)
		Eventually(condition(mc, cachev1alpha1.ConditionAuthReady)).Should(HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing))
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Reason", cachev1alpha1.ReasonAuthSecretMissing))
		Expect(condition(mc, cachev1alpha1.ConditionAvailable)(Default)).To(HaveField("Reason", cachev1alpha1.ReasonScalingUp))
	})
})
