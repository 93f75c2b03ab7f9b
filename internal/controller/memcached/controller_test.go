package memcached_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	discoveryv1ac "k8s.io/client-go/applyconfigurations/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
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

// endpoint is one pod as the EndpointSlice controller lists it.
type endpoint struct {
	pod                string
	ready, terminating bool
}

// setEndpoints stands in for the EndpointSlice controller that envtest
// lacks: the fleet's Service's slice, with the labels it copies from the
// Service, listing these pods.
func setEndpoints(mc *cachev1alpha1.Memcached, eps ...endpoint) {
	GinkgoHelper()
	slice := discoveryv1ac.EndpointSlice(mc.Name+"-abcde", mc.Namespace).
		WithLabels(map[string]string{
			discoveryv1.LabelServiceName: mc.Name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			desired.LabelName: desired.NameValue, desired.LabelInstance: mc.Name, desired.LabelManagedBy: desired.ManagedByValue,
		}).
		WithAddressType(discoveryv1.AddressTypeIPv4)
	for i, ep := range eps {
		slice.WithEndpoints(discoveryv1ac.Endpoint().
			WithAddresses(fmt.Sprintf("10.244.0.%d", i+10)).
			WithConditions(discoveryv1ac.EndpointConditions().WithReady(ep.ready).WithServing(ep.ready).WithTerminating(ep.terminating)).
			WithTargetRef(corev1ac.ObjectReference().WithKind("Pod").WithNamespace(mc.Namespace).WithName(ep.pod)))
	}
	Expect(k8s.Apply(ctx, slice, client.FieldOwner("endpointslice-controller"), client.ForceOwnership)).To(Succeed())
}

func ready(pods ...string) []endpoint {
	var out []endpoint
	for _, p := range pods {
		out = append(out, endpoint{pod: p, ready: true})
	}
	return out
}

func nodesOf(mc *cachev1alpha1.Memcached) func(Gomega) []string {
	return func(g Gomega) []string {
		cur := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
		return cur.Status.Nodes
	}
}

// kstatusOf is the fleet's health as Flux and other kstatus readers compute it.
func kstatusOf(mc *cachev1alpha1.Memcached) func(Gomega) kstatus.Status {
	return func(g Gomega) kstatus.Status {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(cachev1alpha1.GroupVersion.WithKind("Memcached"))
		g.Expect(k8s.Get(ctx, key(mc), u)).To(Succeed())
		res, err := kstatus.Compute(u)
		g.Expect(err).NotTo(HaveOccurred())
		return res.Status
	}
}

func statusOf(mc *cachev1alpha1.Memcached) func(Gomega) cachev1alpha1.MemcachedStatus {
	return func(g Gomega) cachev1alpha1.MemcachedStatus {
		cur := &cachev1alpha1.Memcached{}
		g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
		return cur.Status
	}
}

// markRolledOut stands in for the Deployment controller: every pod of the
// current template is ready and available.
func markRolledOut(mc *cachev1alpha1.Memcached) {
	if ptr.Deref(mc.Spec.Workload, cachev1alpha1.WorkloadDeployment) == cachev1alpha1.WorkloadStatefulSet {
		markSetRolledOut(mc)
		return
	}
	Eventually(func(g Gomega) {
		d := deploymentOf(mc)(g)
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		g.Expect(k8s.Status().Update(ctx, d)).To(Succeed())
	}).Should(Succeed())
}

// rollingOut stands in for the Deployment controller mid-rollout: of
// replicas pods, updated run the current template and ready serve.
func rollingOut(mc *cachev1alpha1.Memcached, replicas, updated, ready int32) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := deploymentOf(mc)(g)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: ready}
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

// sampleEntries is one table entry per file in docs/samples, so a sample
// added there is held to the zero-write property without editing this file.
func sampleEntries() []TableEntry {
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "docs", "samples", "*.yaml"))
	if err != nil || len(files) == 0 {
		panic(fmt.Sprintf("no samples in docs/samples: %v", err))
	}
	var entries []TableEntry
	for _, f := range files {
		entries = append(entries, Entry(filepath.Base(f), filepath.Base(f)))
	}
	return entries
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

		By("listing the ready pods, sorted, in status.nodes and following their churn")
		setEndpoints(mc, ready("memcached-sample-e", "memcached-sample-a", "memcached-sample-c", "memcached-sample-b", "memcached-sample-d")...)
		Eventually(nodesOf(mc)).Should(Equal([]string{"memcached-sample-a", "memcached-sample-b", "memcached-sample-c", "memcached-sample-d", "memcached-sample-e"}))
		By("leaving out pods that are not ready or are terminating")
		setEndpoints(mc, append(ready("memcached-sample-a", "memcached-sample-b"),
			endpoint{pod: "memcached-sample-c", ready: false}, endpoint{pod: "memcached-sample-d", terminating: true}, endpoint{pod: "memcached-sample-e", ready: true})...)
		Eventually(nodesOf(mc)).Should(Equal([]string{"memcached-sample-a", "memcached-sample-b", "memcached-sample-e"}))
	})

	It("says which of its own pods fit on no node, not another fleet's in the same namespace (pods listed by the fleet index)", func() {
		a, b := sample(ns, 1), sample(ns, 1)
		b.Name = "other"
		Expect(k8s.Create(ctx, a)).To(Succeed())
		Expect(k8s.Create(ctx, b)).To(Succeed())
		unschedulable := func(fleet, name, msg string) {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
					desired.LabelName: desired.NameValue, desired.LabelInstance: fleet, desired.LabelManagedBy: desired.ManagedByValue}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:envtest"}}},
			}
			Expect(k8s.Create(ctx, pod)).To(Succeed())
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}
			Expect(k8s.Status().Update(ctx, pod)).To(Succeed())
		}
		unschedulable(b.Name, "other-x", "no node for the other fleet")
		unschedulable(b.Name, "other-y", "no node for the other fleet")
		unschedulable(a.Name, a.Name+"-x", "no node for this fleet")
		Eventually(condition(a, cachev1alpha1.ConditionProgressing)).Should(And(
			HaveField("Reason", cachev1alpha1.ReasonPodsUnschedulable),
			HaveField("Message", And(ContainSubstring("1 pod(s) fit on no node: no node for this fleet"), Not(ContainSubstring("other fleet")))),
		))
		Eventually(condition(b, cachev1alpha1.ConditionProgressing)).Should(HaveField("Message", ContainSubstring("2 pod(s) fit on no node: no node for the other fleet")))
	})

	It("reports Available, Progressing and Degraded with observedGeneration, and no event for a new fleet or its first rollout", func() {
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
		Expect(metricValue(Default, "memcached_operator_status_writes_total", "cause", "change")).To(BeNumerically(">", 0),
			"status writes are counted by cause")

		// A new fleet and its first rollout are the user's doing: no event.
		// Events are sent asynchronously: a late one would show within this window.
		Consistently(func(g Gomega) []string {
			events := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range events.Items {
				if e.Regarding.UID == mc.UID {
					reasons = append(reasons, e.Reason+": "+e.Note)
				}
			}
			return reasons
		}).WithTimeout(3 * time.Second).Should(BeEmpty())
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("scaling up is not Available until the new pods are, and says it is scaling up")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":4}}`)))).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionAvailable)).Should(HaveField("Status", metav1.ConditionFalse))
		Expect(condition(mc, cachev1alpha1.ConditionAvailable)(Default)).To(And(HaveField("Reason", cachev1alpha1.ReasonScalingUp),
			HaveField("Message", "2 of 4 pods available; scaling up, and no ready pod was lost")))
	})

	It("sends a Created event only for a workload built again, not for a new fleet or the PodDisruptionBudget a fleet grown to two pods gets", func() {
		mc := sample(ns, 1)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		createdNotes := func(g Gomega) []string {
			events := &eventsv1.EventList{}
			g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range events.Items {
				if e.Regarding.UID == mc.UID && e.Reason == "Created" {
					notes = append(notes, e.Note)
				}
			}
			return notes
		}
		Eventually(func(g Gomega) int64 { return statusOf(mc)(g).ObservedGeneration }).Should(Equal(mc.Generation))
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(mc), &policyv1.PodDisruptionBudget{}) }).Should(Succeed())
		Eventually(func(g Gomega) int64 { return statusOf(mc)(g).ObservedGeneration }).Should(Equal(mc.Generation))
		// Events are sent asynchronously: a late one would show within this window.
		Consistently(createdNotes).WithTimeout(3 * time.Second).Should(BeEmpty())

		By("deleting the Deployment, which the operator builds again and says so")
		dep := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, key(mc), dep)).To(Succeed())
		Expect(k8s.Delete(ctx, dep)).To(Succeed())
		Eventually(createdNotes).Should(Equal([]string{"created Deployment for " + mc.Name}))
	})

	It("never reports a template change as rolled out before the Deployment has rolled it", func() {
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("patching only the pod template (maxConnections)")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxConnections":2048}}`)))).To(Succeed())
		gen := mc.Generation
		Expect(gen).To(BeNumerically(">", 1))
		By("the first status of the new generation already says the rollout is under way")
		var st cachev1alpha1.MemcachedStatus
		Eventually(func(g Gomega) int64 { st = statusOf(mc)(g); return st.ObservedGeneration }).Should(Equal(gen))
		conds := map[string]metav1.Condition{}
		for _, c := range st.Conditions {
			conds[c.Type] = c
		}
		Expect(conds[cachev1alpha1.ConditionReady]).To(And(HaveField("Status", metav1.ConditionFalse), HaveField("ObservedGeneration", gen)))
		Expect(conds[cachev1alpha1.ConditionProgressing]).To(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", cachev1alpha1.ReasonRollingOut)))
		Expect(conds[cachev1alpha1.ConditionReconciling]).To(HaveField("Status", metav1.ConditionTrue))
		Expect(kstatusOf(mc)(Default)).To(Equal(kstatus.InProgressStatus), "what Flux's health check reads")
		By("while the old pods still serve, the fleet stays Available")
		Expect(conds[cachev1alpha1.ConditionAvailable]).To(HaveField("Status", metav1.ConditionTrue))
		Consistently(condition(mc, cachev1alpha1.ConditionReady), "1s").Should(HaveField("Status", metav1.ConditionFalse))

		By("a surge pod mid-rollout keeps it Available and not Ready")
		rollingOut(mc, 4, 1, 4)
		Eventually(condition(mc, cachev1alpha1.ConditionProgressing)).Should(HaveField("Message", ContainSubstring("1 of 3 pods run the current spec")))
		Expect(condition(mc, cachev1alpha1.ConditionAvailable)(Default).Status).To(Equal(metav1.ConditionTrue))
		Expect(condition(mc, cachev1alpha1.ConditionReady)(Default).Status).To(Equal(metav1.ConditionFalse))

		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		Expect(kstatusOf(mc)(Default)).To(Equal(kstatus.CurrentStatus))
		Expect(deploymentOf(mc)(Default).Spec.Template.Spec.Containers[0].Args).To(ContainElement("2048"))
	})

	It("repairs drift: replicas, image and deleted objects come back, whoever changed them and however", func() {
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

		// Each edit below lands on a Deployment the operator has already
		// found matching: it is repaired only because the edit changes
		// the operator's managed-fields entry, so the digest the cache
		// keeps of it.
		image := func(g Gomega) string { return deploymentOf(mc)(g).Spec.Template.Spec.Containers[0].Image }
		By("reverting kubectl scale deployment, through the Deployment's scale subresource")
		Expect(k8s.SubResource("scale").Update(ctx, deploymentOf(mc)(Default), client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 6}}),
			client.FieldOwner("kubectl-scale"))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(3)))

		By("reverting another manager's forced apply of the image")
		forced := appsv1ac.Deployment(mc.Name, ns).WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("memcached").WithImage("evil:2")))))
		Expect(k8s.Apply(ctx, forced, client.FieldOwner("someone-else"), client.ForceOwnership)).To(Succeed())
		Eventually(image).Should(Equal("memcached:envtest"))

		By("reverting an apply under the operator's own name, as an old replica still running would make")
		stale, err := appsv1ac.ExtractDeployment(deploymentOf(mc)(Default), apply.FieldOwner)
		Expect(err).NotTo(HaveOccurred())
		stale.Spec.Template.Spec.Containers[0].WithImage("memcached:old")
		Expect(k8s.Apply(ctx, stale, client.FieldOwner(apply.FieldOwner), client.ForceOwnership)).To(Succeed())
		Eventually(image).Should(Equal("memcached:envtest"))

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

	DescribeTable("sends zero write requests when nothing changed", func(file string) {
		mc := &cachev1alpha1.Memcached{}
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "samples", file))
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.UnmarshalStrict(raw, mc)).To(Succeed())
		mc.Namespace = ns
		if mc.Spec.Auth != nil {
			// The sample's Secret, which its comment has the user create first.
			Expect(k8s.Create(ctx, authSecret(ns, mc.Spec.Auth.SecretRef.Name))).To(Succeed())
		}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		if mc.Spec.TLS != nil && mc.Spec.TLS.Enabled {
			// cert-manager's part, which envtest does not run.
			Eventually(certificateOf(mc)).ShouldNot(BeNil())
			setCertificateReady(mc, true)
			Eventually(k8s.Get).WithArguments(ctx, key(mc), workloadObject(mc)).Should(Succeed())
		}
		setEndpoints(mc, ready(mc.Name+"-x", mc.Name+"-y", mc.Name+"-z")...)
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		writes := &atomic.Int64{}
		r := &memcached.Reconciler{Client: countingClient{Client: mgr.GetClient(), writes: writes}, APIReader: mgr.GetAPIReader(), Defaults: testCfg, Limits: testLimits}
		req := ctrl.Request{NamespacedName: key(mc)}
		reconcileWrites := func() int64 {
			before := writes.Load()
			_, err := r.Reconcile(ctx, req)
			Expect(err).NotTo(HaveOccurred())
			return writes.Load() - before
		}
		By("waiting until the manager's cache has caught up with the converged fleet")
		Eventually(reconcileWrites).Should(BeZero())
		// A pass before the cache caught up may have written: only the
		// passes after count.
		writes.Store(0)

		versions := func() []string {
			var out []string
			objs := []client.Object{&cachev1alpha1.Memcached{}, workloadObject(mc), &corev1.Service{}, &policyv1.PodDisruptionBudget{}}
			if mc.Spec.TLS != nil {
				cert := &unstructured.Unstructured{}
				cert.SetGroupVersionKind(desired.CertificateGVK)
				objs = append(objs, cert)
			}
			for _, o := range objs {
				Expect(k8s.Get(ctx, key(mc), o)).To(Succeed())
				out = append(out, fmt.Sprintf("%T=%s", o, o.GetResourceVersion()))
			}
			return out
		}
		before := versions()
		skipped := metricValue(Default, "memcached_operator_apply_requests_total", "result", "skipped")
		extractions := metricValue(Default, "memcached_operator_apply_extractions_total", "by", "pass")
		const passes = 20
		for range passes {
			Expect(reconcileWrites()).To(BeZero())
		}
		Expect(metricValue(Default, "memcached_operator_apply_requests_total", "result", "skipped")-skipped).To(BeNumerically(">=", 3*passes),
			"every skipped apply is counted: Deployment, Service and PodDisruptionBudget each pass")
		Expect(writes.Load()).To(BeZero(), "no write over %d no-op reconciles", passes)
		Expect(metricValue(Default, "memcached_operator_apply_extractions_total", "by", "pass")).To(Equal(extractions),
			"a pass compares the digest the cache keeps: it extracts nothing")
		Expect(versions()).To(Equal(before), "no object changed on the server either")
		GinkgoWriter.Printf("%s: no-op reconciles: %d, write requests: %d\n", file, passes, writes.Load())
	}, sampleEntries())

	It("puts spec.service's labels and annotations on the Service, follows their edits and removes them with the field", func() {
		mc := sample(ns, 1)
		mc.Spec.Service = &cachev1alpha1.ServiceSpec{Labels: map[string]string{"team": "web"},
			Annotations: map[string]string{"external-dns.alpha.kubernetes.io/hostname": "a.example.org"}}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		service := func(g Gomega) *corev1.Service {
			svc := &corev1.Service{}
			g.Expect(k8s.Get(ctx, key(mc), svc)).To(Succeed())
			return svc
		}
		Eventually(service).Should(And(
			HaveField("Labels", And(HaveKeyWithValue("team", "web"), HaveKeyWithValue("app.kubernetes.io/managed-by", "memcached-operator"))),
			HaveField("Annotations", HaveKeyWithValue("external-dns.alpha.kubernetes.io/hostname", "a.example.org"))))
		selector := service(Default).Spec.Selector

		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"service":{"labels":{"team":null,"tier":"cache"},"annotations":{"external-dns.alpha.kubernetes.io/hostname":"b.example.org"}}}}`)))).To(Succeed())
		Eventually(service).Should(And(
			HaveField("Labels", And(HaveKeyWithValue("tier", "cache"), Not(HaveKey("team")))),
			HaveField("Annotations", HaveKeyWithValue("external-dns.alpha.kubernetes.io/hostname", "b.example.org"))))

		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"service":null}}`)))).To(Succeed())
		Eventually(service).Should(And(
			HaveField("Labels", And(Not(HaveKey("tier")), HaveKeyWithValue("app.kubernetes.io/instance", mc.Name))),
			HaveField("Annotations", Not(HaveKey("external-dns.alpha.kubernetes.io/hostname")))))
		Expect(service(Default).Spec.Selector).To(Equal(selector))
	})

	It("leaves a paused fleet's objects alone with zero writes, says so, and resumes without a rollout", func() {
		mc := sample(ns, 2)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		dep := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, key(mc), dep)).To(Succeed())
		template := dep.Spec.Template.DeepCopy()

		annotate := func(value *string) {
			GinkgoHelper()
			v := "null"
			if value != nil {
				v = `"` + *value + `"`
			}
			Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"`+cachev1alpha1.PausedAnnotation+`":`+v+`}}}`)))).To(Succeed())
		}
		paused := func(g Gomega) *metav1.Condition {
			cur := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
			return meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionPaused)
		}
		By("pausing: another spelling of true does not pause")
		annotate(ptr.To("True"))
		Consistently(paused).WithTimeout(time.Second).Should(BeNil())
		annotate(ptr.To("true"))
		Eventually(condition(mc, cachev1alpha1.ConditionPaused)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", cachev1alpha1.ReasonPaused)))

		By("editing the Deployment and the spec while paused")
		Expect(k8s.Patch(ctx, dep, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`)))).To(Succeed())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":3}}`)))).To(Succeed())
		Consistently(replicasOf(mc)).WithTimeout(2*time.Second).Should(Equal(int32(5)), "the edit survives")
		got := &cachev1alpha1.Memcached{}
		Expect(k8s.Get(ctx, key(mc), got)).To(Succeed())
		Expect(got.Status.ObservedGeneration).To(BeNumerically("<", got.Generation), "the new spec reads as not acted on")

		// The Paused condition names the new generation: the one status write.
		Eventually(condition(mc, cachev1alpha1.ConditionPaused)).Should(HaveField("Status", metav1.ConditionTrue))

		writes := &atomic.Int64{}
		r := &memcached.Reconciler{Client: countingClient{Client: mgr.GetClient(), writes: writes}, APIReader: mgr.GetAPIReader(), Defaults: testCfg, Limits: testLimits}
		reconcileWrites := func() int64 {
			before := writes.Load()
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key(mc)})
			Expect(err).NotTo(HaveOccurred())
			return writes.Load() - before
		}
		By("waiting until the manager's cache has caught up with the paused fleet")
		Eventually(reconcileWrites).Should(BeZero())
		for range 10 {
			Expect(reconcileWrites()).To(BeZero(), "no write while paused")
		}
		Expect(replicasOf(mc)(Default)).To(Equal(int32(5)))

		By("resuming")
		annotate(nil)
		Eventually(replicasOf(mc)).Should(Equal(int32(3)), "the spec applies again, the edit is repaired")
		Eventually(paused).Should(BeNil())
		Expect(k8s.Get(ctx, key(mc), dep)).To(Succeed())
		Expect(dep.Spec.Template).To(Equal(*template), "the same pod template: no rollout")
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
		Expect(names).To(Equal([]string{"Name", "Size", "Ready", "Available", "Status", "Age"}))
		Expect(table.Rows).To(HaveLen(1))
		Expect(table.Rows[0].Cells[:4]).To(Equal([]any{"memcached-sample", float64(2), float64(2), "True"}))
	})

	It("reports fleets by condition and each fleet's desired and ready pods as metrics", func() {
		mc := sample(ns, 2)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))
		Eventually(func(g Gomega) {
			g.Expect(metricValue(g, "memcached_operator_fleet_pods", "namespace", ns, "name", mc.Name, "state", "desired")).To(Equal(2.0))
			g.Expect(metricValue(g, "memcached_operator_fleet_pods", "namespace", ns, "name", mc.Name, "state", "ready")).To(Equal(2.0))
			g.Expect(metricValue(g, "memcached_operator_fleets", "condition", "Ready", "status", "True")).To(BeNumerically(">=", 1))
		}).Should(Succeed())
		sent := metricValue(Default, "memcached_operator_apply_requests_total", "kind", "Deployment", "result", "sent")
		Expect(sent).To(BeNumerically(">=", 1))

		By("a phase that fails is counted under its phase and reason")
		errorsBefore := metricValue(Default, "memcached_operator_reconcile_errors_total", "phase", "validate", "reason", "InvalidSpec")
		bad := sample(ns, 1)
		bad.Name = "bad"
		bad.Spec.ExtraArgs = []string{"-d"}
		Expect(k8s.Create(ctx, bad)).To(Succeed())
		Eventually(func(g Gomega) float64 {
			return metricValue(g, "memcached_operator_reconcile_errors_total", "phase", "validate", "reason", "InvalidSpec")
		}).Should(BeNumerically(">", errorsBefore))

		By("a deleted fleet leaves no series behind")
		Expect(k8s.Delete(ctx, mc)).To(Succeed())
		Eventually(func(g Gomega) float64 {
			return metricValue(g, "memcached_operator_fleet_pods", "namespace", ns, "name", mc.Name)
		}).Should(BeZero())
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
