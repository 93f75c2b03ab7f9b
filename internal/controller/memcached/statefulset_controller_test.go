package memcached_test

import (
	"fmt"
	"maps"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
)

// workloadObject is an empty object of the kind that runs mc's pods.
func workloadObject(mc *cachev1alpha1.Memcached) client.Object {
	if ptr.Deref(mc.Spec.Workload, cachev1alpha1.WorkloadDeployment) == cachev1alpha1.WorkloadStatefulSet {
		return &appsv1.StatefulSet{}
	}
	return &appsv1.Deployment{}
}

func statefulSetOf(mc *cachev1alpha1.Memcached) func(Gomega) *appsv1.StatefulSet {
	return func(g Gomega) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{}
		g.Expect(k8s.Get(ctx, key(mc), s)).To(Succeed())
		return s
	}
}

// markSetRolledOut stands in for the StatefulSet controller: every pod of
// the current revision is ready and available.
func markSetRolledOut(mc *cachev1alpha1.Memcached) {
	GinkgoHelper()
	setStatus(mc, func(s *appsv1.StatefulSet) {
		n := *s.Spec.Replicas
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			CurrentRevision: "r1", UpdateRevision: "r1"}
	})
}

func setStatus(mc *cachev1alpha1.Memcached, f func(*appsv1.StatefulSet)) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		s := statefulSetOf(mc)(g)
		f(s)
		g.Expect(k8s.Status().Update(ctx, s)).To(Succeed())
	}).Should(Succeed())
}

func stableSample(ns string, size int32) *cachev1alpha1.Memcached {
	mc := sample(ns, size)
	mc.Spec.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
	return mc
}

var _ = Describe("A fleet with stable pods (workload StatefulSet)", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("runs a StatefulSet named like the fleet, lists its ready servers by DNS name, and resizes it", func() {
		mc := stableSample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())

		By("creating a StatefulSet of 3 governed by the headless Service, a budget, and no Deployment")
		Eventually(func(g Gomega) int32 { return *statefulSetOf(mc)(g).Spec.Replicas }).Should(Equal(int32(3)))
		set := statefulSetOf(mc)(Default)
		Expect(set.OwnerReferences).To(ConsistOf(HaveField("UID", mc.UID)))
		Expect(set.Spec.ServiceName).To(Equal(mc.Name))
		Expect(set.Spec.Template.Spec.Containers[0].Image).To(Equal("memcached:envtest"))
		svc := &corev1.Service{}
		Eventually(k8s.Get).WithArguments(ctx, key(mc), svc).Should(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &policyv1.PodDisruptionBudget{}).Should(Succeed())
		Consistently(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &appsv1.Deployment{}))
		}).WithTimeout(500 * time.Millisecond).Should(BeTrue())

		By("listing the ready pods' host:port, by ordinal, and only the ready ones")
		setEndpoints(mc, append(ready("memcached-sample-2", "memcached-sample-0"), endpoint{pod: "memcached-sample-1"})...)
		Eventually(func(g Gomega) []string { return statusOf(mc)(g).Servers }).Should(Equal([]string{
			"memcached-sample-0." + mc.Name + "." + ns + ".svc:11211", "memcached-sample-2." + mc.Name + "." + ns + ".svc:11211"}))

		By("reporting Ready once the StatefulSet has rolled out, as kstatus reads it")
		markSetRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(statusOf(mc)(Default).Replicas).To(Equal(int32(3)))

		By("following kubectl patch to 5 and kubectl scale to 2")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":5}}`)))).To(Succeed())
		Eventually(func(g Gomega) int32 { return *statefulSetOf(mc)(g).Spec.Replicas }).Should(Equal(int32(5)))
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionFalse))
		Expect(k8s.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 2}}))).To(Succeed())
		Eventually(func(g Gomega) int32 { return *statefulSetOf(mc)(g).Spec.Replicas }).Should(Equal(int32(2)))
	})

	It("refuses to switch an existing fleet between Deployment and StatefulSet, and says what to do instead", func() {
		stable := stableSample(ns, 1)
		Expect(k8s.Create(ctx, stable)).To(Succeed())
		err := k8s.Patch(ctx, stable, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"workload":"Deployment"}}`)))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(And(ContainSubstring("workload is immutable"), ContainSubstring("create a new Memcached")))

		By("a fleet created before the field existed reads as Deployment, and stays one")
		old := sample(ns, 1)
		old.Name = "older"
		Expect(k8s.Create(ctx, old)).To(Succeed())
		read := &cachev1alpha1.Memcached{}
		Expect(k8s.Get(ctx, key(old), read)).To(Succeed())
		Expect(read.Spec.Workload).To(HaveValue(Equal(cachev1alpha1.WorkloadDeployment)))
		err = k8s.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"workload":"StatefulSet"}}`)))
		Expect(err).To(MatchError(ContainSubstring("workload is immutable")))
		Expect(k8s.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"workload":null,"size":2}}`)))).To(Succeed(),
			"removing the field leaves the default, the same workload")
	})
})

// podsLikeStatefulSet stands in for the StatefulSet controller and the
// kubelets: pods <name>-<i> of the set's current template, at revision
// rev, each running its image and ready.
func podsLikeStatefulSet(mc *cachev1alpha1.Memcached, rev string, ordinals ...int) {
	GinkgoHelper()
	set := statefulSetOf(mc)(Default)
	for _, i := range ordinals {
		tpl := set.Spec.Template.DeepCopy()
		pod := &corev1.Pod{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}
		pod.Name, pod.Namespace = fmt.Sprintf("%s-%d", mc.Name, i), mc.Namespace
		pod.Labels = maps.Clone(tpl.Labels)
		pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
		kubeletRuns(pod)
	}
}

// kubeletRuns stands in for the kubelet: the pod's containers run the
// images its spec names, and it is ready.
func kubeletRuns(pod *corev1.Pod) {
	GinkgoHelper()
	kubeletStatus(pod, false)
}

// kubeletRestarts is kubeletRuns after memcached's container restarted
// (the launcher ends it on a new command line).
func kubeletRestarts(pod *corev1.Pod) {
	GinkgoHelper()
	kubeletStatus(pod, true)
}

func kubeletStatus(pod *corev1.Pod, restarted bool) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key(pod), pod)).To(Succeed())
		restarts := map[string]int32{}
		for _, c := range pod.Status.ContainerStatuses {
			restarts[c.Name] = c.RestartCount
		}
		if restarted {
			restarts["memcached"]++
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		pod.Status.ContainerStatuses = nil
		for _, c := range pod.Spec.Containers {
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, RestartCount: restarts[c.Name]})
		}
		g.Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
	}).Should(Succeed())
}

// setAt stands in for the StatefulSet controller after it observed the
// template: rev is its update revision, updated the pods at it.
func setAt(mc *cachev1alpha1.Memcached, rev string, updated int32) {
	GinkgoHelper()
	setStatus(mc, func(s *appsv1.StatefulSet) {
		n := *s.Spec.Replicas
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: n, UpdatedReplicas: updated, ReadyReplicas: n, AvailableReplicas: n,
			CurrentRevision: "r1", UpdateRevision: rev}
	})
}

// budgetAllows stands in for the disruption controller.
func budgetAllows(mc *cachev1alpha1.Memcached, n int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		pdb := &policyv1.PodDisruptionBudget{}
		g.Expect(k8s.Get(ctx, key(mc), pdb)).To(Succeed())
		pdb.Status.DisruptionsAllowed, pdb.Status.ObservedGeneration = n, pdb.Generation
		g.Expect(k8s.Status().Update(ctx, pdb)).To(Succeed())
	}).Should(Succeed())
}

func podOf(mc *cachev1alpha1.Memcached, i int) func(Gomega) *corev1.Pod {
	return func(g Gomega) *corev1.Pod {
		p := &corev1.Pod{}
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: mc.Namespace, Name: fmt.Sprintf("%s-%d", mc.Name, i)}, p)).To(Succeed())
		return p
	}
}

func argsOf(mc *cachev1alpha1.Memcached, i int) func(Gomega) string {
	return func(g Gomega) string { return podOf(mc, i)(g).Annotations[desired.ArgsAnnotation] }
}

func imageOf(mc *cachev1alpha1.Memcached, i int) func(Gomega) string {
	return func(g Gomega) string { return podOf(mc, i)(g).Spec.Containers[0].Image }
}

var _ = Describe("A fleet with warm restarts", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("changes an image or a command line in place one pod at a time, highest ordinal first, each after the one before restarted; any other change replaces pods one at a time", func() {
		mc := stableSample(ns, 3)
		mc.Spec.WarmRestart = &cachev1alpha1.WarmRestartSpec{Enabled: true}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(func(g Gomega) appsv1.StatefulSetUpdateStrategyType {
			return statefulSetOf(mc)(g).Spec.UpdateStrategy.Type
		}).Should(Equal(appsv1.OnDeleteStatefulSetStrategyType))
		podsLikeStatefulSet(mc, "r1", 0, 1, 2)
		setAt(mc, "r1", 3)
		budgetAllows(mc, 1)
		setEndpoints(mc, ready("memcached-sample-0", "memcached-sample-1", "memcached-sample-2")...)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("a new image: the highest ordinal first, in place, and no other pod while it has not restarted")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"image":"memcached:envtest-2"}}`)))).To(Succeed())
		Eventually(func(g Gomega) string { return statefulSetOf(mc)(g).Spec.Template.Spec.Containers[0].Image }).Should(Equal("memcached:envtest-2"))
		setAt(mc, "r2", 0)
		Eventually(imageOf(mc, 2)).Should(Equal("memcached:envtest-2"))
		Expect(podOf(mc, 2)(Default).Labels).To(HaveKeyWithValue(appsv1.ControllerRevisionHashLabelKey, "r2"))
		uid := podOf(mc, 2)(Default).UID
		Consistently(imageOf(mc, 1)).WithTimeout(time.Second).Should(Equal("memcached:envtest"), "memcached-sample-2 has not restarted on its new image")
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(And(HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", ContainSubstring("1 restarting memcached in place"))))

		By("once its memcached restarted and it is ready, the next")
		kubeletRuns(podOf(mc, 2)(Default))
		Consistently(imageOf(mc, 1)).WithTimeout(time.Second).Should(Equal("memcached:envtest"), "the kubelet reports the new image, but memcached has not restarted")
		kubeletRestarts(podOf(mc, 2)(Default))
		Eventually(imageOf(mc, 1)).Should(Equal("memcached:envtest-2"))
		Expect(imageOf(mc, 0)(Default)).To(Equal("memcached:envtest"))
		kubeletRestarts(podOf(mc, 1)(Default))
		Eventually(imageOf(mc, 0)).Should(Equal("memcached:envtest-2"))
		kubeletRestarts(podOf(mc, 0)(Default))
		Expect(podOf(mc, 2)(Default).UID).To(Equal(uid), "the same pod, with its memory file")
		setAt(mc, "r2", 3)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("a change of memcached's command line: in place too, the next pod only once memcached restarted with it")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxConnections":2048}}`)))).To(Succeed())
		Eventually(func(g Gomega) string { return statefulSetOf(mc)(g).Spec.Template.Annotations[desired.ArgsAnnotation] }).Should(ContainSubstring(`"2048"`))
		setAt(mc, "r3", 0)
		Eventually(argsOf(mc, 2)).Should(ContainSubstring(`"2048"`))
		Expect(podOf(mc, 2)(Default).Annotations).To(HaveKeyWithValue(desired.RestartsAnnotation, "1"), "its restarts before: one, the image's")
		kubeletRuns(podOf(mc, 2)(Default))
		Consistently(argsOf(mc, 1)).WithTimeout(time.Second).ShouldNot(ContainSubstring(`"2048"`), "memcached-sample-2 has not restarted with its new command line")
		kubeletRestarts(podOf(mc, 2)(Default))
		Eventually(argsOf(mc, 1)).Should(ContainSubstring(`"2048"`))
		kubeletRestarts(podOf(mc, 1)(Default))
		Eventually(argsOf(mc, 0)).Should(ContainSubstring(`"2048"`))
		kubeletRestarts(podOf(mc, 0)(Default))
		Expect(podOf(mc, 2)(Default).UID).To(Equal(uid), "the same pod, with its memory file")
		setAt(mc, "r3", 3)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("any other change of the pods: replaced, the highest ordinal first, one at a time")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"podAnnotations":{"rollout":"1"}}}`)))).To(Succeed())
		Eventually(func(g Gomega) map[string]string { return statefulSetOf(mc)(g).Spec.Template.Annotations }).Should(HaveKey("rollout"))
		setAt(mc, "r4", 0)
		Eventually(func() bool {
			p := &corev1.Pod{}
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "memcached-sample-2"}, p))
		}).Should(BeTrue())
		Consistently(func(g Gomega) types.UID { return podOf(mc, 1)(g).UID }).WithTimeout(time.Second).ShouldNot(BeEmpty(), "one pod at a time")
		podsLikeStatefulSet(mc, "r4", 2)
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "memcached-sample-1"}, &corev1.Pod{}))
		}).Should(BeTrue())
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "memcached-sample-0"}, &corev1.Pod{})).To(Succeed())
	})

	It("resizes memcached in place for a memory change, one pod at a time: the resize, then the command line that copies the cache", func() {
		mc := stableSample(ns, 2)
		mc.Spec.WarmRestart = &cachev1alpha1.WarmRestartSpec{Enabled: true}
		mc.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(func(g Gomega) appsv1.StatefulSetUpdateStrategyType {
			return statefulSetOf(mc)(g).Spec.UpdateStrategy.Type
		}).Should(Equal(appsv1.OnDeleteStatefulSetStrategyType))
		podsLikeStatefulSet(mc, "r1", 0, 1)
		setAt(mc, "r1", 2)
		budgetAllows(mc, 1)
		setEndpoints(mc, ready("memcached-sample-0", "memcached-sample-1")...)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		uid := podOf(mc, 1)(Default).UID
		memoryLimit := func(i int) func(Gomega) string {
			return func(g Gomega) string { return podOf(mc, i)(g).Spec.Containers[0].Resources.Limits.Memory().String() }
		}

		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"limits":{"memory":"160Mi"}}}}`)))).To(Succeed())
		Eventually(func(g Gomega) string { return statefulSetOf(mc)(g).Spec.Template.Annotations[desired.ArgsAnnotation] }).Should(ContainSubstring(`"-m","144"`))
		setAt(mc, "r2", 0)
		By("the highest ordinal resized first, through its resize subresource, then given the new item memory")
		Eventually(memoryLimit(1)).Should(Equal("160Mi"))
		Eventually(argsOf(mc, 1)).Should(ContainSubstring(`"-m","144"`))
		Expect(podOf(mc, 1)(Default).Labels).To(HaveKeyWithValue(appsv1.ControllerRevisionHashLabelKey, "r2"))
		Consistently(memoryLimit(0)).WithTimeout(time.Second).Should(Equal("128Mi"), "memcached-sample-1 has not restarted with its new item memory")
		kubeletRestarts(podOf(mc, 1)(Default))
		By("then the next")
		Eventually(memoryLimit(0)).Should(Equal("160Mi"))
		Eventually(argsOf(mc, 0)).Should(ContainSubstring(`"-m","144"`))
		kubeletRestarts(podOf(mc, 0)(Default))
		Expect(podOf(mc, 1)(Default).UID).To(Equal(uid), "the same pod, with its memory file")
		setAt(mc, "r2", 2)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("a resize the API server refuses (a limit removed) replaces the pod")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"limits":{"memory":null},"requests":{"memory":"160Mi"}}}}`)))).To(Succeed())
		Eventually(func(g Gomega) corev1.ResourceList {
			return statefulSetOf(mc)(g).Spec.Template.Spec.Containers[0].Resources.Limits
		}).Should(BeEmpty())
		setAt(mc, "r3", 0)
		// Less memory: the command line first, then the resize, refused;
		// the highest ordinal first.
		for _, i := range []int{1, 0} {
			Eventually(argsOf(mc, i)).Should(ContainSubstring(`"-m","64"`))
			kubeletRestarts(podOf(mc, i)(Default))
			Eventually(func() bool {
				return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("memcached-sample-%d", i)}, &corev1.Pod{}))
			}).Should(BeTrue())
			podsLikeStatefulSet(mc, "r3", i)
		}
		setAt(mc, "r3", 2)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("a memory change beyond the room the pods were made with replaces them")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"limits":{"memory":"512Mi"},"requests":null}}}`)))).To(Succeed())
		Eventually(func(g Gomega) string { return statefulSetOf(mc)(g).Spec.Template.Annotations[desired.ArgsAnnotation] }).Should(ContainSubstring(`"-m","460"`))
		setAt(mc, "r4", 0)
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "memcached-sample-1"}, &corev1.Pod{}))
		}).Should(BeTrue())
	})
})
