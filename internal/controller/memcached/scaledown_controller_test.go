package memcached_test

import (
	"fmt"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/desired"
)

const zoneKey = "topology.kubernetes.io/zone"

// runningPod stands in for the ReplicaSet, the scheduler and the kubelet:
// a ready pod of the fleet on node, labelled with its zone as the API
// server labels a bound pod.
func runningPod(ns, name, node, zone string) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			desired.LabelName: desired.NameValue, desired.LabelInstance: "memcached-sample",
			desired.LabelManagedBy: desired.ManagedByValue, zoneKey: zone,
		}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "memcached", Image: "memcached:envtest"}}},
	}
	Expect(k8s.Create(ctx, p)).To(Succeed())
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	Expect(k8s.Status().Update(ctx, p)).To(Succeed())
	return p
}

// cachedReady waits until the operator's cache holds n ready pods in ns: a
// scale-down is judged on what the operator has seen.
func cachedReady(ns string, n int) {
	GinkgoHelper()
	Eventually(func(g Gomega) int {
		pods := &corev1.PodList{}
		g.Expect(mgr.GetCache().List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		ready := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready
	}).Should(Equal(n))
}

// noPodMarked holds, for a while, that no pod in ns carries the scale-down's
// deletion cost: the choice is why's.
func noPodMarked(ns, why string) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		for _, p := range pods.Items {
			g.Expect(p.Annotations).NotTo(HaveKey(desired.PodDeletionCost), why)
		}
	}).Should(Succeed())
}

var _ = Describe("A scale-down of a fleet spread over zones", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("marks the pods that keep the zones even before it lowers the Deployment's replicas", func() {
		mc := sample(ns, 7)
		mc.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: corev1.DoNotSchedule}}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(7)))
		markRolledOut(mc)
		// The testbed's layout: nodes 1 and 3 in zone a, node 2 alone in
		// zone b. The ReplicaSet, ranking by node, would remove node 2's
		// three pods first and leave zone b empty.
		zoneOf := map[string]string{}
		for i, node := range []string{"n1", "n1", "n3", "n3", "n2", "n2", "n2"} {
			zone := map[string]string{"n1": "a", "n2": "b", "n3": "a"}[node]
			p := runningPod(ns, fmt.Sprintf("memcached-sample-%d", i), node, zone)
			zoneOf[p.Name] = zone
		}
		cachedReady(ns, 7)

		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":3}}`)))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))

		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		kept := map[string]int{"a": 0, "b": 0}
		var lastMark int64
		for _, p := range pods.Items {
			if p.Annotations[desired.PodDeletionCost] == desired.FirstToGo {
				rv, err := strconv.ParseInt(p.ResourceVersion, 10, 64)
				Expect(err).NotTo(HaveOccurred())
				lastMark = max(lastMark, rv)
				continue
			}
			kept[zoneOf[p.Name]]++
		}
		Expect(kept).To(SatisfyAny(Equal(map[string]int{"a": 2, "b": 1}), Equal(map[string]int{"a": 1, "b": 2})),
			"four pods marked, the three kept spread over both zones")
		// envtest's resourceVersions are etcd revisions: the marks were
		// written before the Deployment was scaled, so the ReplicaSet meets them.
		d := deploymentOf(mc)(Default)
		rv, err := strconv.ParseInt(d.ResourceVersion, 10, 64)
		Expect(err).NotTo(HaveOccurred())
		Expect(lastMark).To(BeNumerically("<", rv), "pods marked before the Deployment's scale-down")
	})

	It("leaves a scale-down during a rollout to the Deployment: no pod marked", func() {
		mc := sample(ns, 3)
		mc.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: corev1.DoNotSchedule}}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))
		By("a rollout under way: one of three pods runs the new template")
		rollingOut(mc, 4, 1, 3)
		for i, node := range []string{"n1", "n1", "n2"} {
			runningPod(ns, fmt.Sprintf("memcached-sample-%d", i), node, map[string]string{"n1": "a", "n2": "b"}[node])
		}
		cachedReady(ns, 3)
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		noPodMarked(ns, "the Deployment spreads it over old and new pods")
	})

	It("marks nothing without spread constraints: the ReplicaSet chooses", func() {
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))
		markRolledOut(mc)
		for i, node := range []string{"n1", "n1", "n2"} {
			runningPod(ns, fmt.Sprintf("memcached-sample-%d", i), node, "a")
		}
		cachedReady(ns, 3)
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		noPodMarked(ns, "the ReplicaSet's own choice")
	})
})

var _ = Describe("A scale-down chosen before", func() {
	It("is corrected when the pods moved: a mark no longer chosen is removed", func() {
		ns := newNamespace()
		mc := sample(ns, 3)
		mc.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: corev1.DoNotSchedule}}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))
		markRolledOut(mc)
		stale := runningPod(ns, "memcached-sample-0", "n1", "a")
		runningPod(ns, "memcached-sample-1", "n2", "b")
		runningPod(ns, "memcached-sample-2", "n3", "b")
		// A mark left by an earlier scale-down that was called off: zone a's
		// only pod must not go now.
		Expect(k8s.Patch(ctx, stale, client.RawPatch(types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+desired.PodDeletionCost+`":"`+desired.FirstToGo+`"}}}`)))).To(Succeed())
		cachedReady(ns, 3)
		Eventually(func(g Gomega) map[string]string {
			p := &corev1.Pod{}
			g.Expect(mgr.GetCache().Get(ctx, key(stale), p)).To(Succeed())
			return p.Annotations
		}).Should(HaveKey(desired.PodDeletionCost))

		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		marked := func(name string) bool {
			p := &corev1.Pod{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
			return p.Annotations[desired.PodDeletionCost] == desired.FirstToGo
		}
		Expect(marked("memcached-sample-0")).To(BeFalse(), "zone a's only pod stays")
		Expect(marked("memcached-sample-1")).NotTo(Equal(marked("memcached-sample-2")), "one of zone b's two goes")
	})
})
