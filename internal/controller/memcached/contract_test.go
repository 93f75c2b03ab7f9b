package memcached_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/memcached"
	"github.com/example/memcached-operator/test/testenv"
)

// The controller's side of the admission contract: this suite runs without
// the webhooks, as `make run` and namespaces the webhooks exclude do.

func userDeployment(ns, name string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "mine:1"}}},
			},
		},
	}
}

var _ = Describe("Memcached controller without webhooks", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("builds nothing for a spec that breaks a rule, says why, and builds once it is fixed", func() {
		mc := sample(ns, 2)
		mc.Spec.ExtraArgs = []string{"-m2048"}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", cachev1alpha1.ReasonInvalidSpec),
			HaveField("Message", ContainSubstring("spec.extraArgs[0]"))))
		Expect(condition(mc, cachev1alpha1.ConditionStalled)(Default).Status).To(Equal(metav1.ConditionTrue))
		Expect(condition(mc, cachev1alpha1.ConditionReady)(Default).Reason).To(Equal(cachev1alpha1.ReasonInvalidSpec))
		Expect(kstatusOf(mc)(Default)).To(Equal(kstatus.FailedStatus), "Flux and Argo CD see a failed resource, not one in progress forever")
		Consistently(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &appsv1.Deployment{})) }).Should(BeTrue())

		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"extraArgs":["-C"]}}`)))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
	})

	It("holds --max-size: never builds a fleet past it", func() {
		mc := sample(ns, testLimits.MaxSize+2)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(And(
			HaveField("Reason", cachev1alpha1.ReasonInvalidSpec), HaveField("Message", ContainSubstring("--max-size"))))
		Expect(apierrors.IsNotFound(k8s.Get(ctx, key(mc), &appsv1.Deployment{}))).To(BeTrue())

		Consistently(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &appsv1.Deployment{})) }).Should(BeTrue())

		By("a size within the cap is built")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":5}}`)))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(5)))
		// A fleet above a cap lowered since, which may shrink but not grow,
		// is TestValidateRatchetsSizeAgainstTheFleetsDeployment's: one
		// reconciler's cap judged alone, which this suite's own cannot be.
	})

	It("never adopts a Deployment it does not control, and takes the name once it is free", func() {
		theirs := userDeployment(ns, "memcached-sample", map[string]string{"app": "mine"})
		Expect(k8s.Create(ctx, theirs)).To(Succeed())
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Reason", cachev1alpha1.ReasonNameConflict),
			HaveField("Message", ContainSubstring("Deployment "+ns+"/memcached-sample"))))
		Expect(condition(mc, cachev1alpha1.ConditionStalled)(Default).Status).To(Equal(metav1.ConditionTrue))
		By("the conflicting object has no owner reference to requeue the fleet, so it is looked at again after a while")
		r := &memcached.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Defaults: testCfg, Limits: testLimits}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key(mc)})
		Expect(err).NotTo(HaveOccurred())
		Expect(res.RequeueAfter).To(Equal(time.Minute))

		By("the other phases still run: the Service and the PodDisruptionBudget exist")
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &corev1.Service{}).Should(Succeed())
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &policyv1.PodDisruptionBudget{}).Should(Succeed())

		By("the user's Deployment is left exactly as it was")
		Consistently(func(g Gomega) {
			cur := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, key(theirs), cur)).To(Succeed())
			g.Expect(cur.ResourceVersion).To(Equal(theirs.ResourceVersion), "not written at all")
			g.Expect(cur.OwnerReferences).To(BeEmpty())
			g.Expect(cur.Labels).To(Equal(map[string]string{"app": "mine"}))
			g.Expect(*cur.Spec.Replicas).To(Equal(int32(2)))
			g.Expect(cur.Spec.Template.Spec.Containers[0].Image).To(Equal("mine:1"))
		}).Should(Succeed())

		By("once the user removes it, the next pass creates the fleet's own")
		Expect(k8s.Delete(ctx, theirs)).To(Succeed())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			d := deploymentOf(mc)(g)
			g.Expect(metav1.IsControlledBy(d, mc)).To(BeTrue())
		}).Should(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(HaveField("Status", metav1.ConditionFalse))
	})

	It("takes a Deployment with its name and labels that it does not control for none of its own", func() {
		// The labelled orphan of a deleted fleet of the same name, or a
		// tenant's imitation: in the operator's cache, but never the fleet's.
		labels := map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "memcached-sample", "app.kubernetes.io/managed-by": "memcached-operator"}
		orphan := userDeployment(ns, "memcached-sample", labels)
		orphan.Spec.Replicas = ptr.To[int32](50)
		Expect(k8s.Create(ctx, orphan)).To(Succeed())
		orphan.Status = appsv1.DeploymentStatus{ObservedGeneration: orphan.Generation, Replicas: 50, ReadyReplicas: 50, AvailableReplicas: 50, UpdatedReplicas: 50}
		Expect(k8s.Status().Update(ctx, orphan)).To(Succeed())

		By("a TLS fleet waiting for its Certificate reports no pods of the orphan's")
		mc := withFleetTLS(sample(ns, 2))
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionCertificateReady)).Should(HaveField("Status", metav1.ConditionFalse))
		Consistently(func(g Gomega) []int32 {
			cur := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
			return []int32{cur.Status.Replicas, cur.Status.ReadyReplicas}
		}).Should(Equal([]int32{0, 0}))

		By("nor does the orphan's replica count let the fleet grow past --max-size")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"size":%d}}`, testLimits.MaxSize+2))))).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(And(
			HaveField("Reason", cachev1alpha1.ReasonInvalidSpec), HaveField("Message", ContainSubstring("spec.size"))))
	})

	It("writes nothing to a Service or PodDisruptionBudget of its name that it does not control", func() {
		// The operator's cache never holds these (they lack its labels): its
		// create-only apply must come back Conflict without changing them.
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample", Namespace: ns, Labels: map[string]string{"app": "mine"}},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "mine"}, Ports: []corev1.ServicePort{{Port: 80}}}}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "memcached-sample", Namespace: ns},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mine"}}}}
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		Expect(k8s.Create(ctx, pdb)).To(Succeed())
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(And(
			HaveField("Reason", cachev1alpha1.ReasonNameConflict),
			HaveField("Message", ContainSubstring("Service "+ns+"/memcached-sample")),
			HaveField("Message", ContainSubstring("PodDisruptionBudget "+ns+"/memcached-sample"))))
		By("the fleet's own Deployment is created all the same")
		Eventually(func(g Gomega) { g.Expect(metav1.IsControlledBy(deploymentOf(mc)(g), mc)).To(BeTrue()) }).Should(Succeed())
		Consistently(func(g Gomega) {
			for _, o := range []client.Object{svc, pdb} {
				cur := o.DeepCopyObject().(client.Object)
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(o), cur)).To(Succeed())
				g.Expect(cur.GetResourceVersion()).To(Equal(o.GetResourceVersion()), "%T not written at all", o)
			}
		}).Should(Succeed())
	})

	It("re-applies its own objects, on the resourceVersion read live, when its cache has not seen them yet", func() {
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(metav1.IsControlledBy(deploymentOf(mc)(g), mc)).To(BeTrue()) }).Should(Succeed())
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &corev1.Service{}).Should(Succeed())
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &policyv1.PodDisruptionBudget{}).Should(Succeed())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		// The manager's own pass over the new size ends first: a Deployment
		// it writes between the pass's live read and its apply would make
		// the API server answer Conflict.
		Eventually(func(g Gomega) {
			cur := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
			g.Expect(cur.Status.ObservedGeneration).To(Equal(cur.Generation))
		}).Should(Succeed())

		By("a pass whose cache misses the Deployment, Service and PodDisruptionBudget, against the real API server")
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		var (
			mu   sync.Mutex
			read string
			sent = map[string][]string{}
		)
		stale := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				switch obj.(type) {
				case *appsv1.Deployment, *corev1.Service, *policyv1.PodDisruptionBudget:
					return apierrors.NewNotFound(schema.GroupResource{}, k.Name)
				}
				err := c.Get(ctx, k, obj, opts...)
				if _, ok := obj.(*cachev1alpha1.Memcached); ok {
					read = obj.GetResourceVersion()
				}
				return err
			},
			// Lists by fleet need the cache's indexes, as in the manager.
			List: func(ctx context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				return mgr.GetClient().List(ctx, list, opts...)
			},
			Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				raw, err := json.Marshal(obj)
				Expect(err).NotTo(HaveOccurred())
				u := &unstructured.Unstructured{}
				Expect(u.UnmarshalJSON(raw)).To(Succeed())
				mu.Lock()
				sent[u.GetKind()] = append(sent[u.GetKind()], u.GetResourceVersion())
				mu.Unlock()
				return c.Apply(ctx, obj, opts...)
			},
		})
		r := &memcached.Reconciler{Client: stale, APIReader: mgr.GetAPIReader(), Defaults: testCfg, Limits: testLimits}
		_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: key(mc)})
		Expect(err).NotTo(HaveOccurred())
		Expect(read).NotTo(BeEmpty())
		for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget"} {
			Expect(sent).To(HaveKeyWithValue(kind, HaveExactElements(read, And(Not(BeEmpty()), Not(Equal(read))))),
				"%s: create-only first (the API server answers Conflict), then on the condition of the resourceVersion read live", kind)
		}
		Expect(replicasOf(mc)(Default)).To(Equal(int32(2)), "the Deployment ends at the new size")
		Expect(metav1.IsControlledBy(deploymentOf(mc)(Default), mc)).To(BeTrue())
		Expect(condition(mc, cachev1alpha1.ConditionDegraded)(Default).Reason).NotTo(Equal(cachev1alpha1.ReasonNameConflict))
	})

	It("keeps status it could not observe when a phase fails, and runs the other phases", func() {
		mc := sample(ns, 3)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		setEndpoints(mc, ready("memcached-sample-a", "memcached-sample-b", "memcached-sample-c")...)
		markRolledOut(mc)
		Eventually(condition(mc, cachev1alpha1.ConditionReady)).Should(HaveField("Status", metav1.ConditionTrue))

		By("someone takes the fleet's Service over: its owner reference is removed")
		Expect(k8s.Patch(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Namespace: ns}},
			client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/ownerReferences"}]`)))).To(Succeed())

		By("and the size changes: the Deployment and PDB phases still run")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":4}}`)))).To(Succeed())
		Eventually(replicasOf(mc)).Should(Equal(int32(4)))
		Eventually(condition(mc, cachev1alpha1.ConditionDegraded)).Should(And(
			HaveField("Reason", cachev1alpha1.ReasonNameConflict), HaveField("Message", ContainSubstring("Service "+ns+"/memcached-sample"))))
		st := statusOf(mc)(Default)
		Expect(st.Nodes).To(Equal([]string{"memcached-sample-a", "memcached-sample-b", "memcached-sample-c"}))
		Expect(st.Replicas).To(Equal(int32(3)), "what the Deployment reports, not zero")
	})

	It("leaves a fleet alone while its namespace is being deleted", func() {
		mc := sample(ns, 2)
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		Eventually(k8s.Get).WithArguments(ctx, key(mc), &corev1.Service{}).Should(Succeed())
		Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, key(mc), svc)).To(Succeed())
		Expect(k8s.Delete(ctx, svc)).To(Succeed())

		r := &memcached.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Defaults: testCfg, Limits: testLimits}
		Eventually(func(g Gomega) {
			g.Expect(mgr.GetCache().Get(ctx, key(mc), &corev1.Service{})).NotTo(Succeed())
		}).Should(Succeed())
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key(mc)})
		Expect(err).NotTo(HaveOccurred(), "no error, so no retries and no error logs")
		Expect(res).To(Equal(ctrl.Result{}))
		Consistently(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), &corev1.Service{})) }).Should(BeTrue())
	})
})

var _ = Describe("A fleet's ServiceMonitor", func() {
	It("waits for the ServiceMonitor API without failing, creates the object once the CRD is installed, and removes it when monitoring is turned off", func() {
		ns := newNamespace()
		mc := sample(ns, 2)
		mc.Spec.Monitoring = &cachev1alpha1.MonitoringSpec{
			Exporter:       &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)},
			ServiceMonitor: &cachev1alpha1.ServiceMonitorSpec{Enabled: ptr.To(true), Interval: ptr.To("15s"), Labels: map[string]string{"release": "prom"}},
		}
		Expect(k8s.Create(ctx, mc)).To(Succeed())
		By("without the CRD: a condition says so, and the fleet is built and not degraded")
		Eventually(condition(mc, cachev1alpha1.ConditionServiceMonitorReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", cachev1alpha1.ReasonServiceMonitorAPIMissing)))
		Eventually(replicasOf(mc)).Should(Equal(int32(2)))
		Expect(deploymentOf(mc)(Default).Spec.Template.Spec.Containers).To(HaveLen(2), "memcached and the exporter")
		Expect(condition(mc, cachev1alpha1.ConditionDegraded)(Default).Status).To(Equal(metav1.ConditionFalse))

		By("installing the CRD later: the operator notices on its own")
		_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{testenv.ServiceMonitorCRDDir()}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(condition(mc, cachev1alpha1.ConditionServiceMonitorReady)).Should(HaveField("Status", metav1.ConditionTrue))
		sm := &unstructured.Unstructured{}
		sm.SetGroupVersionKind(desired.ServiceMonitorGVK)
		Expect(k8s.Get(ctx, key(mc), sm)).To(Succeed())
		Expect(metav1.IsControlledBy(sm, mc)).To(BeTrue())
		Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prom"))
		endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		Expect(endpoints).To(ConsistOf(map[string]any{"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "5s"}))
		limit, _, _ := unstructured.NestedInt64(sm.Object, "spec", "sampleLimit")
		Expect(limit).To(Equal(int64(4096)), "a target that answers more than the exporter ever gives is not it")
		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, key(mc), svc)).To(Succeed())
		Expect(svc.Spec.Ports).To(ContainElement(HaveField("Name", "metrics")))

		By("turning monitoring off removes the ServiceMonitor and its condition")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":{"serviceMonitor":{"enabled":false}}}}`)))).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key(mc), sm)) }).Should(BeTrue())
		Eventually(func(g Gomega) {
			cur := &cachev1alpha1.Memcached{}
			g.Expect(k8s.Get(ctx, key(mc), cur)).To(Succeed())
			g.Expect(meta.FindStatusCondition(cur.Status.Conditions, cachev1alpha1.ConditionServiceMonitorReady)).To(BeNil())
		}).Should(Succeed())

		By("uninstalling the CRD: the fleet says the API is missing again, without retrying in error")
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":{"serviceMonitor":{"enabled":true}}}}`)))).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionServiceMonitorReady)).Should(HaveField("Status", metav1.ConditionTrue))
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		crd.SetName("servicemonitors.monitoring.coreos.com")
		Expect(k8s.Delete(ctx, crd)).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(crd), crd)) }).Should(BeTrue())
		Expect(k8s.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":{"serviceMonitor":{"interval":"30s"}}}}`)))).To(Succeed())
		Eventually(condition(mc, cachev1alpha1.ConditionServiceMonitorReady)).Should(And(
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", cachev1alpha1.ReasonServiceMonitorAPIMissing)))
		errors := func(g Gomega) float64 {
			return metricValue(g, "memcached_operator_reconcile_errors_total", "phase", "servicemonitor")
		}
		Consistently(errors).Should(Equal(errors(Default)), "nothing left to retry")
	})
})
