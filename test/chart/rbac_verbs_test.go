package chart_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
)

// verbRecorder records the RBAC verb of every request a client sends, the
// way the API server's authorizer sees it.
type verbRecorder struct {
	mu   sync.Mutex
	seen sets.Set[string]
}

var requestInfo = &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}

func (v *verbRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		info, ierr := requestInfo.NewRequestInfo(req)
		if ierr == nil && info.IsResourceRequest {
			verbs := []string{info.Verb}
			// An apply that creates the object is authorized for create too.
			if info.Verb == "patch" && err == nil && resp.StatusCode == http.StatusCreated {
				verbs = append(verbs, "create")
			}
			v.mu.Lock()
			for _, verb := range verbs {
				v.seen.Insert(ruleKey(info.APIGroup, info.Resource, info.Subresource, verb))
			}
			v.mu.Unlock()
		}
		return resp, err
	})
}

func (v *verbRecorder) verbs() sets.Set[string] {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.seen.Clone()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func ruleKey(group, resource, sub, verb string) string {
	if sub != "" {
		resource += "/" + sub
	}
	if group == "" {
		group = "core"
	}
	return fmt.Sprintf("%s %s %s", group, resource, verb)
}

// grantedVerbs expands the rules of the chart's operator ClusterRole.
func grantedVerbs(objs []*unstructured.Unstructured, name string) sets.Set[string] {
	GinkgoHelper()
	out := sets.New[string]()
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" || o.GetName() != name {
			continue
		}
		role := &rbacv1.ClusterRole{}
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role)).To(Succeed())
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					resource, sub, _ := strings.Cut(res, "/")
					for _, verb := range r.Verbs {
						out.Insert(ruleKey(g, resource, sub, verb))
					}
				}
			}
		}
	}
	Expect(out).NotTo(BeEmpty(), "ClusterRole %s in the render", name)
	return out
}

// strangersNamed creates, under name, a Deployment, a Service, a
// PodDisruptionBudget and a NetworkPolicy that no Memcached controls.
func strangersNamed(ctx context.Context, ns, name string) {
	GinkgoHelper()
	meta := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "theirs"}}
	sel := &metav1.LabelSelector{MatchLabels: meta.Labels}
	for _, o := range []client.Object{
		&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Selector: sel, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "theirs:1"}}}}}},
		&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Selector: sel, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "theirs:1"}}}}}},
		&corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Selector: meta.Labels, Ports: []corev1.ServicePort{{Port: 80}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: meta, Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: ptr.To(intstr.FromInt32(1))}},
		&networkingv1.NetworkPolicy{ObjectMeta: meta, Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel}},
	} {
		Expect(k8sClient.Create(ctx, o)).To(Succeed())
	}
}

// unobservable are granted verbs no request shows: the API server checks
// them on the operator's behalf.
var unobservable = map[string]string{
	// OwnerReferencesPermissionEnforcement asks, for every owner reference
	// with blockOwnerDeletion, whether the writer may update the owner's
	// finalizers; the next spec proves the rule is needed.
	"cache.example.com memcacheds/finalizers update": "authorized by the admission plugin",
	// The event recorder patches an event that repeats within minutes into
	// a series; a short test run sends each event once.
	"events.k8s.io events patch": "event series",
}

// verbWait bounds each wait for a request, or a policy's parameters, to be
// seen: a reconcile is quick, but `make test` runs every package's suite at
// once on two cores, beside CI's e2e suites.
const verbWait = time.Minute

var _ = Describe("The operator's RBAC rules", func() {
	It("are exactly the verbs the operator sends, observed over a fleet's lifecycle", func(ctx SpecContext) {
		const rel, ns = "mc-verbs", "mc-cluster-system"
		sa := rel + "-memcached-operator"
		objs := renderSet(rel, ns, ciValues("default"))
		installRBAC(ctx, objs)
		cfg, _ := as(ns, sa)
		rec := &verbRecorder{seen: sets.New[string]()}
		cfg.Wrap(rec.wrap)

		runOperator(cfg, ns, nil)
		reconciledBy(ctx, "team-b", "verbs")
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "verbs"}}
		By("turning on monitoring, which creates a ServiceMonitor, then off, which deletes it")
		Expect(k8sClient.Patch(ctx, mc, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"monitoring":{"exporter":{"enabled":true,"image":"op:1"},"serviceMonitor":{"enabled":true}}}}`)))).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("monitoring.coreos.com servicemonitors create"))
		Expect(k8sClient.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"monitoring":{"serviceMonitor":{"enabled":false}}}}`)))).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("monitoring.coreos.com servicemonitors delete"))
		By("turning on a NetworkPolicy, then off, which deletes it")
		Expect(k8sClient.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"networkPolicy":{"enabled":true}}}`)))).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("networking.k8s.io networkpolicies create"))
		Expect(k8sClient.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"networkPolicy":{"enabled":false}}}`)))).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("networking.k8s.io networkpolicies delete"))
		By("a fleet with auth, built without a request for its Secret")
		authReconciledBy(ctx, "team-b", "verbs-auth")
		By("a fleet with TLS: its Certificate created, read, watched, changed (another issuer), then deleted when TLS is off")
		tlsReconciledBy(ctx, "team-b", "verbs-tls")
		tls := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "verbs-tls"}}
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElements(
			"cert-manager.io certificates create", "cert-manager.io certificates get", "cert-manager.io certificates watch"))
		Expect(k8sClient.Patch(ctx, tls, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"tls":{"issuerRef":{"name":"other-ca"}}}}`)))).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("cert-manager.io certificates patch"))
		Expect(k8sClient.Patch(ctx, tls, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"tls":{"enabled":false}}}`)))).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("cert-manager.io certificates delete"))
		By("spreading the fleet over zones, then scaling it to one pod, which marks the pod to remove and removes the PodDisruptionBudget")
		runningPods(ctx, "team-b", "verbs", map[string]string{"verbs-a": "zone-a", "verbs-b": "zone-a"})
		Expect(k8sClient.Patch(ctx, mc, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"DoNotSchedule"}]}}`)))).To(Succeed())
		rolledOut(ctx, "team-b", "verbs")
		Expect(k8sClient.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":1}}`)))).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElements(
			"policy poddisruptionbudgets delete", "core pods patch"))

		By("a fleet with stable pods: its StatefulSet created, then resized")
		stable := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "verbs-stable"},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Workload: ptr.To(cachev1alpha1.WorkloadStatefulSet)}}
		Expect(k8sClient.Create(ctx, stable)).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("apps statefulsets create"))
		Expect(k8sClient.Patch(ctx, stable, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":2}}`)))).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("apps statefulsets patch"))

		By("a fleet with warm restarts, which replaces its outdated pod itself")
		warm := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "verbs-warm"},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Workload: ptr.To(cachev1alpha1.WorkloadStatefulSet),
				WarmRestart: &cachev1alpha1.WarmRestartSpec{Enabled: true, LauncherImage: ptr.To("op:1")}}}
		Expect(k8sClient.Create(ctx, warm)).To(Succeed())
		outdated := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "verbs-warm-0", Labels: map[string]string{
				"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "verbs-warm",
				"app.kubernetes.io/managed-by": "memcached-operator", appsv1.ControllerRevisionHashLabelKey: "r1",
			}, Annotations: map[string]string{desired.TemplateAnnotation: "before"}},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}},
		}
		Expect(k8sClient.Create(ctx, outdated)).To(Succeed())
		outdated.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		outdated.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "memcached", Image: "memcached:1.6", Ready: true}}
		Expect(k8sClient.Status().Update(ctx, outdated)).To(Succeed())
		Eventually(func(g Gomega) {
			set := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(warm), set)).To(Succeed())
			set.Status = appsv1.StatefulSetStatus{ObservedGeneration: set.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				CurrentRevision: "r1", UpdateRevision: "r2"}
			g.Expect(k8sClient.Status().Update(ctx, set)).To(Succeed())
		}).WithTimeout(verbWait).Should(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("core pods delete"))

		By("a fleet with warm restarts whose memory grows: its pod resized in place")
		resized := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "verbs-resized"},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Workload: ptr.To(cachev1alpha1.WorkloadStatefulSet),
				WarmRestart: &cachev1alpha1.WarmRestartSpec{Enabled: true, LauncherImage: ptr.To("op:1")},
				Resources:   &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}}}
		Expect(k8sClient.Create(ctx, resized)).To(Succeed())
		set := &appsv1.StatefulSet{}
		Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKeyFromObject(resized), set) }).WithTimeout(verbWait).Should(Succeed())
		// The pod the StatefulSet controller would make of the template.
		current := &corev1.Pod{ObjectMeta: *set.Spec.Template.ObjectMeta.DeepCopy(), Spec: *set.Spec.Template.Spec.DeepCopy()}
		current.Namespace, current.Name, current.Spec.NodeName = "team-b", "verbs-resized-0", "node-a"
		current.Labels[appsv1.ControllerRevisionHashLabelKey] = "r1"
		Expect(k8sClient.Create(ctx, current)).To(Succeed())
		current.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		current.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "memcached", Image: "memcached:1.6", Ready: true}}
		Expect(k8sClient.Status().Update(ctx, current)).To(Succeed())
		Expect(k8sClient.Patch(ctx, resized, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resources":{"limits":{"memory":"160Mi"}}}}`)))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(resized), set)).To(Succeed())
			g.Expect(set.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("160Mi"))
			set.Status = appsv1.StatefulSetStatus{ObservedGeneration: set.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				CurrentRevision: "r1", UpdateRevision: "r2"}
			g.Expect(k8sClient.Status().Update(ctx, set)).To(Succeed())
		}).WithTimeout(verbWait).Should(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("core pods/resize patch"))

		By("a fleet whose name someone else's objects hold: each create-only apply answers Conflict, and the operator reads the object to say whose it is")
		strangersNamed(ctx, "team-b", "verbs-taken")
		taken := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "verbs-taken"},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), NetworkPolicy: &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}}}
		Expect(k8sClient.Create(ctx, taken)).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElements(
			"apps deployments get", "core services get", "policy poddisruptionbudgets get", "networking.k8s.io networkpolicies get"))
		strangersNamed(ctx, "team-b", "verbs-taken-set")
		Expect(k8sClient.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "verbs-taken-set"},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1), Workload: ptr.To(cachev1alpha1.WorkloadStatefulSet)}})).To(Succeed())
		Eventually(func() []string { return sets.List(rec.verbs()) }).WithTimeout(verbWait).Should(ContainElement("apps statefulsets get"))

		granted := grantedVerbs(objs, sa)
		seen := rec.verbs()
		operatorRole := sets.New[string]()
		for k := range seen {
			// Leader election's Lease and its core/v1 events belong to the
			// leader-election Role in the release namespace.
			if !strings.HasPrefix(k, "coordination.k8s.io ") && !strings.HasPrefix(k, "core events ") {
				operatorRole.Insert(k)
			}
		}
		GinkgoWriter.Printf("verbs sent: %v\n", sets.List(operatorRole))
		Expect(sets.List(operatorRole.Difference(granted))).To(BeEmpty(), "sent without a grant")
		mayBeUnseen := sets.New(slices.Collect(maps.Keys(unobservable))...)
		for k := range operatorRole {
			// Informers open with a watch that streams the initial list
			// (WatchList); a server without it, or a fallback, sends LIST.
			if list, ok := strings.CutSuffix(k, " watch"); ok {
				mayBeUnseen.Insert(list + " list")
			}
		}
		unused := sets.List(granted.Difference(operatorRole))
		Expect(mayBeUnseen.IsSuperset(sets.New(unused...))).To(BeTrue(), "granted but never sent: %v", sets.List(sets.New(unused...).Difference(mayBeUnseen)))
		Expect(granted.Has("cache.example.com memcacheds/finalizers update")).To(BeTrue())
	})

	It("need memcacheds/finalizers on an API server that enforces owner-reference permissions", func(ctx SpecContext) {
		const rel, ns = "mc-finalizers", "mc-cluster-system"
		sa := rel + "-memcached-operator"
		objs := renderSet(rel, ns, ciValues("default"))
		installRBAC(ctx, objs)
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "finalizers"},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](0)}}
		Expect(k8sClient.Create(ctx, mc)).To(Succeed())
		owned := func(name string) *corev1ac.ServiceApplyConfiguration {
			return corev1ac.Service(name, "other").
				WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("cache.example.com/v1alpha1").WithKind("Memcached").
					WithName(mc.Name).WithUID(mc.UID).WithController(true).WithBlockOwnerDeletion(true)).
				WithSpec(corev1ac.ServiceSpec().WithClusterIP("None").WithPorts(corev1ac.ServicePort().WithPort(11211)))
		}
		_, c := as(ns, sa)
		Expect(c.Apply(ctx, owned("with-grant"), client.FieldOwner("memcached-operator"))).To(Succeed())

		By("the same ServiceAccount, with the finalizers rule taken out of its role")
		role := &rbacv1.ClusterRole{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: sa}, role)).To(Succeed())
		role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "memcacheds/finalizers") })
		Expect(k8sClient.Update(ctx, role)).To(Succeed())
		// The API server's authorizer learns of the role's change from its
		// informer, which under `make test` on two cores took longer than
		// Eventually's default second (a CI run failed on it). Each attempt
		// creates a Service of its own: an apply that got through before the
		// change left an object whose owner reference, unchanged, is not
		// checked again.
		attempt := 0
		Eventually(func() error {
			attempt++
			return c.Apply(ctx, owned(fmt.Sprintf("without-grant-%d", attempt)), client.FieldOwner("memcached-operator"))
		}).WithTimeout(verbWait).Should(MatchError(ContainSubstring("cannot set blockOwnerDeletion")))
	})
})

// runningPods stands in for the ReplicaSet, the scheduler and the kubelet
// (envtest has none): the fleet's pods (name → zone) run and are ready,
// labelled with their zone as the API server labels bound pods.
func runningPods(ctx context.Context, ns, name string, pods map[string]string) {
	GinkgoHelper()
	for pod, zone := range pods {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod, Labels: map[string]string{
				"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": name,
				"app.kubernetes.io/managed-by": "memcached-operator", "topology.kubernetes.io/zone": zone,
			}},
			Spec: corev1.PodSpec{NodeName: "node-" + pod, Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
	}
}

// rolledOut stands in for the Deployment controller: once the fleet's
// Deployment carries the spread constraints (the operator has read the
// change, after the pods), it is rolled out. It returns once the fleet's
// status says the operator has seen the rollout complete: a scale-down it
// reads as mid-rollout is left to the Deployment controller, unmarked.
func rolledOut(ctx context.Context, ns, name string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.TopologySpreadConstraints).NotTo(BeEmpty())
		n := ptr.Deref(d.Spec.Replicas, 1)
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
		g.Expect(k8sClient.Status().Update(ctx, d)).To(Succeed())
	}).WithTimeout(verbWait).Should(Succeed())
	Eventually(func(g Gomega) {
		mc := &cachev1alpha1.Memcached{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc)).To(Succeed())
		g.Expect(mc.Status.ObservedGeneration).To(Equal(mc.Generation))
		c := apimeta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionProgressing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonRolloutComplete))
	}).WithTimeout(verbWait).Should(Succeed())
}
