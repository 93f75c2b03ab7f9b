package memcached_test

import (
	"fmt"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/memcached"
	"github.com/example/memcached-operator/test/testenv"
)

func newNamespace() string {
	GinkgoHelper()
	ns, err := testenv.NewNamespace(ctx, k8s, "mc-")
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// sample is the operator-sdk tutorial's sample CR, unchanged but for its namespace.
func sample(ns string, size int32) *cachev1alpha1.Memcached {
	return &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample", Namespace: ns},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To(size)},
	}
}

func key(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

func deploymentOf(mc *cachev1alpha1.Memcached) func(Gomega) *appsv1.Deployment {
	return func(g Gomega) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, key(mc), d)).To(Succeed())
		return d
	}
}

func replicasOf(mc *cachev1alpha1.Memcached) func(Gomega) int32 {
	return func(g Gomega) int32 { return *deploymentOf(mc)(g).Spec.Replicas }
}

// createPods stands in for the ReplicaSet controller that envtest lacks.
func createPods(mc *cachev1alpha1.Memcached, names ...string) {
	for _, n := range names {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: mc.Namespace, Labels: map[string]string{
				memcached.LabelName: memcached.NameValue, memcached.LabelInstance: mc.Name, memcached.LabelManagedBy: memcached.ManagedByValue,
			}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:envtest"}}},
		}
		Expect(k8s.Create(ctx, pod)).To(Succeed())
	}
}

// markRolledOut stands in for the Deployment controller: every pod of the
// current template is ready and available.
func markRolledOut(mc *cachev1alpha1.Memcached) {
	Eventually(func(g Gomega) {
		d := deploymentOf(mc)(g)
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		g.Expect(k8s.Status().Update(ctx, d)).To(Succeed())
	}).Should(Succeed())
}

func condition(mc *cachev1alpha1.Memcached, t string) func(Gomega) metav1.Condition {
	return func(g Gomega) metav1.Condition {
		cur := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
		c := meta.FindStatusCondition(cur.Status.Conditions, t)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.ObservedGeneration).To(Equal(cur.Generation))
		return *c
	}
}

var _ = Describe("Memcached controller", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("runs the tutorial's flow: size 3, patch to 5, pod names in status.nodes", func() {
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())

		By("creating a Deployment of 3, a headless Service and a PodDisruptionBudget, all owned by the Memcached")
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))
		d := deploymentOf(mc)(Default)
		Expect(d.OwnerReferences).To(ConsistOf(HaveField("UID", mc.UID)))
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("memcached:envtest"))
		svc := &corev1.Service{}
		Eventually(k8s.Get).WithArguments(ctx, key(mc), svc).Should(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(svc.OwnerReferences).To(ConsistOf(HaveField("UID", mc.UID)))
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &policyv1.PodDisruptionBudget{}).Should(Succeed())

		By("following kubectl patch --type=merge -p '{\"spec\":{\"size\":5}}'")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":5}}`)))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(5)))

		By("listing the pods, sorted, in status.nodes and following their churn")
		createPods(mc, "memcached-sample-e", "memcached-sample-a", "memcached-sample-c", "memcached-sample-b", "memcached-sample-d")
		nodes := func(g Gomega) []string {
			cur := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
			return cur.Status.Nodes
		}
		Eventually(nodes).Should(Equal([]string{"memcached-sample-a", "memcached-sample-b", "memcached-sample-c", "memcached-sample-d", "memcached-sample-e"}))
		Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample-c", Namespace: ns}})).To(Succeed())
		Eventually(nodes).Should(Equal([]string{"memcached-sample-a", "memcached-sample-b", "memcached-sample-d", "memcached-sample-e"}))
	})

	It("reports Available, Progressing and Degraded with observedGeneration, and an event on the transition", func() {
		mc := sample(ns, 2)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionAvailable)).Should(HaveField("Status", metav1.ConditionFalse))
		Eventually(condition(mc, cachev1alpha1.ConditionProgressing)).Should(HaveField("Status", metav1.ConditionTrue))

		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionAvailable)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", cachev1alpha1.ReasonAllReplicasReady)))
		Eventually(condition(mc, cachev1alpha1.ConditionProgressing)).Should(HaveField("Status", metav1.ConditionFalse))
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
		cur := &cachev1alpha1.Memcached{}
		Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
		Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		Expect(cur.Status.Replicas).To(Equal(int32(2)))
		Expect(cur.Status.ReadyReplicas).To(Equal(int32(2)))

		Eventually(func(g Gomega) []string {
			events := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range events.Items {
				if e.Regarding.UID == mc.UID {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElements("Created", cachev1alpha1.ReasonAllReplicasReady))

		By("a new generation is not Available until the Deployment has rolled it out")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":4}}`)))).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionAvailable)).Should(HaveField("Status", metav1.ConditionFalse))
	})

	It("repairs drift: replicas, image and deleted objects come back", func() {
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))

		By("reverting kubectl scale deployment --replicas=7")
		d := deploymentOf(mc)(Default)
		d.Spec.Replicas = ptr.To[int32](7)
		Expect(k8s.Update(ctx, d, client.FieldOwner("kubectl-edit"))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))

		By("reverting an edited image and args")
		patch := `{"spec":{"template":{"spec":{"containers":[{"name":"memcached","image":"evil:1","args":["-m","1"]}]}}}}`
		Expect(k8s.Patch(ctx, deploymentOf(mc)(Default), client.RawPatch(types.StrategicMergePatchType, []byte(patch)), client.FieldOwner("someone"))).To(Succeed())
		Eventually(func(g Gomega) []string {
			c := deploymentOf(mc)(g).Spec.Template.Spec.Containers[0]
			g.Expect(c.Image).To(Equal("memcached:envtest"))
			return c.Args
		}).Should(HaveExactElements("-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m"))

		By("recreating a deleted Deployment and Service")
		old := deploymentOf(mc)(Default)
		Expect(k8s.Delete(ctx, old)).To(Succeed())
		Eventually(func(g Gomega) types.UID { return deploymentOf(mc)(g).UID }).ShouldNot(Equal(old.UID))
		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, key(mc), svc)).To(Succeed())
		Expect(k8s.Delete(ctx, svc)).To(Succeed())
		Eventually(func(g Gomega) types.UID {
			cur := &corev1.Service{}
			g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
			return cur.UID
		}).ShouldNot(Equal(svc.UID))
	})

	It("sends zero write requests when nothing changed", func() {
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		createPods(mc, "memcached-sample-x", "memcached-sample-y", "memcached-sample-z")
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionAvailable)).Should(HaveField("Status", metav1.ConditionTrue))

		writes := &atomic.Int64{}
		r := &memcached.Reconciler{Client: countingClient{Client: mgr.GetClient(), writes: writes}, Defaults: testCfg}
		req := ctrl.Request{NamespacedName: key(mc)}
		reconcileWrites := func() int64 {
			before := writes.Load()
			_, err := r.Reconcile(ctx, req)
			Expect(err).NotTo(HaveOccurred())
			return writes.Load() - before
		}
		By("waiting until the manager's cache has caught up with the converged fleet")
		Eventually(reconcileWrites).Should(BeZero())

		versions := func() []string {
			var out []string
			for _, o := range []client.Object{&cachev1alpha1.Memcached{}, &appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
				Expect(k8s.Get(ctx, key(mc), o)).To(Succeed())
				out = append(out, fmt.Sprintf("%T=%s", o, o.GetResourceVersion()))
			}
			return out
		}
		before := versions()
		const passes = 20
		for range passes {
			Expect(reconcileWrites()).To(BeZero())
		}
		Expect(writes.Load()).To(BeZero(), "no write over %d no-op reconciles", passes)
		Expect(versions()).To(Equal(before), "no object changed on the server either")
		GinkgoWriter.Printf("no-op reconciles: %d, write requests: %d\n", passes, writes.Load())
	})

	It("scales through the scale subresource, as kubectl scale and an HPA do", func() {
		mc := sample(ns, 1)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(1)))

		scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
		Expect(k8s.SubResource("scale").Update(ctx, mc, client.WithSubResourceBody(scale))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(4)))

		markRolledOut(mc)
		Eventually(func(g Gomega) autoscalingv1.ScaleStatus {
			got := &autoscalingv1.Scale{}
			g.Expect(k8s.SubResource("scale").Get(ctx, mc, got)).To(Succeed())
			return got.Status
		}).Should(Equal(autoscalingv1.ScaleStatus{Replicas: 4, Selector: "app.kubernetes.io/instance=memcached-sample,app.kubernetes.io/name=memcached"}))
	})

	It("deletes the PodDisruptionBudget when scaled down to one pod", func() {
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &policyv1.PodDisruptionBudget{}).Should(Succeed())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":1}}`)))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &policyv1.PodDisruptionBudget{}))
		}).Should(BeTrue())
	})

	It("shows Size, Ready and Available as kubectl's printer columns", func() {
		mc := sample(ns, 2)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionAvailable)).Should(HaveField("Status", metav1.ConditionTrue))

		rc, err := rest.HTTPClientFor(cfg)
		Expect(err).NotTo(HaveOccurred())
		req := fmt.Sprintf("%s/apis/cache.example.com/v1alpha1/namespaces/%s/memcacheds", strings.TrimSuffix(cfg.Host, "/"), ns)
		table := &metav1.Table{}
		Expect(getJSON(rc, req, "application/json;as=Table;v=v1;g=meta.k8s.io", table)).To(Succeed())
		var names []string
		for _, c := range table.ColumnDefinitions {
			names = append(names, c.Name)
		}
		Expect(names).To(Equal([]string{"Name", "Size", "Ready", "Available", "Age"}))
		Expect(table.Rows).To(HaveLen(1))
		Expect(table.Rows[0].Cells[:4]).To(Equal([]any{"memcached-sample", float64(2), float64(2), "True"}))
	})

	It("caches only the operator's own objects", func() {
		foreign := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}},
				},
			},
		}
		Expect(k8s.Create(ctx, foreign)).To(Succeed())
		mc := sample(ns, 1)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(mgr.GetCache().Get).WithArguments(ctx, key(mc), &appsv1.Deployment{}).Should(Succeed())
		Consistently(func() bool {
			return apierrors.IsNotFound(mgr.GetCache().Get(ctx, key(foreign), &appsv1.Deployment{}))
		}).Should(BeTrue())
		list := &appsv1.DeploymentList{}
		Expect(mgr.GetCache().List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(ConsistOf(HaveField("Name", "memcached-sample")))
	})
})
