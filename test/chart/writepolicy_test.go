package chart_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/internal/webhookcert"
)

// converted decodes an apply configuration into its API type.
func converted[T any](in any) *T {
	GinkgoHelper()
	raw, err := json.Marshal(in)
	Expect(err).NotTo(HaveOccurred())
	out := new(T)
	Expect(json.Unmarshal(raw, out)).To(Succeed())
	return out
}

// deniedBy matches the refusal of a ValidatingAdmissionPolicy whose message
// holds part.
func deniedBy(part string) OmegaMatcher {
	return WithTransform(func(err error) string {
		if err == nil {
			return "admitted"
		}
		return string(apierrors.ReasonForError(err)) + ": " + err.Error()
	}, And(HavePrefix("Forbidden: "), ContainSubstring("ValidatingAdmissionPolicy"), ContainSubstring(part)))
}

var _ = Describe("The operator's write policy", Ordered, func() {
	const rel, ns, tenant = "mc-guard", "mc-guard-system", "team-a"
	var (
		c     client.Client
		owner *cachev1alpha1.Memcached
		spec  *cachev1alpha1.MemcachedSpec
		n     int
	)
	// fresh names every object a spec creates, so attempts never collide.
	fresh := func(base string) string { n++; return fmt.Sprintf("%s-%d", base, n) }

	BeforeAll(func(ctx SpecContext) {
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		objs := renderSet(rel, ns, ciValues("default"))
		installRBAC(ctx, objs)
		for _, obj := range objs {
			if warmPodsPolicy(obj) {
				Expect(applyObject(ctx, k8sClient, obj)).To(Succeed())
			}
		}
		_, c = as(ns, rel+"-memcached-operator")
		owner = &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "guarded"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
		Expect(k8sClient.Create(ctx, owner)).To(Succeed())
		spec = policy.Resolve(&owner.Spec, policy.Config{DefaultImage: "memcached:1.6"})
		// The policy is in force once it refuses: the API server loads it
		// a moment after it is created.
		Eventually(func() error {
			return c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: fresh("probe")},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 11211}}}})
		}).WithTimeout(verbWait).Should(deniedBy("controls"))
	})

	// fleetDeployment is the Deployment the operator builds for owner,
	// under another name, changed by mutate.
	fleetDeployment := func(mutate func(*appsv1.Deployment)) *appsv1.Deployment {
		d := converted[appsv1.Deployment](desired.Deployment(owner, spec))
		d.Name = fresh("guarded")
		mutate(d)
		return d
	}

	It("admits the objects the operator builds, as the operator sends them", func(ctx SpecContext) {
		Expect(c.Apply(ctx, desired.Deployment(owner, spec), client.FieldOwner(apply.FieldOwner))).To(Succeed())
		Expect(c.Apply(ctx, desired.Service(owner, spec), client.FieldOwner(apply.FieldOwner))).To(Succeed())
		Expect(c.Apply(ctx, desired.PodDisruptionBudget(owner, spec), client.FieldOwner(apply.FieldOwner))).To(Succeed())
		withPolicy := spec.DeepCopy()
		withPolicy.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}
		Expect(c.Apply(ctx, desired.NetworkPolicy(owner, withPolicy), client.FieldOwner(apply.FieldOwner))).To(Succeed())
		withAuth := spec.DeepCopy()
		withAuth.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users", Key: ptr.To("auth")}, ReloaderImage: ptr.To("op:1")}
		Expect(c.Create(ctx, fleetDeployment(func(d *appsv1.Deployment) {
			*d = *converted[appsv1.Deployment](desired.Deployment(owner, withAuth))
			d.Name = fresh("guarded")
		}))).To(Succeed(), "the auth check is an init container of the same shape")
		Expect(c.Delete(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: owner.Name}})).To(Succeed(), "a fleet's budget, removed at size 1")
		stable := spec.DeepCopy()
		stable.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
		Expect(c.Apply(ctx, desired.StatefulSet(owner, stable), client.FieldOwner(apply.FieldOwner))).To(Succeed(), "the StatefulSet of a fleet with stable pods")
	})

	It("holds a fleet's StatefulSet to the same rules as its Deployment", func(ctx SpecContext) {
		stable := spec.DeepCopy()
		stable.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
		fleetSet := func(mutate func(*appsv1.StatefulSet)) *appsv1.StatefulSet {
			set := converted[appsv1.StatefulSet](desired.StatefulSet(owner, stable))
			set.Name = fresh("guarded")
			mutate(set)
			return set
		}
		Expect(c.Create(ctx, fleetSet(func(*appsv1.StatefulSet) {}))).To(Succeed())
		Expect(c.Create(ctx, fleetSet(func(s *appsv1.StatefulSet) { s.OwnerReferences = nil }))).To(deniedBy("controls"))
		Expect(c.Create(ctx, fleetSet(func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.HostNetwork = true }))).To(deniedBy("host namespace"))
		Expect(c.Create(ctx, fleetSet(func(s *appsv1.StatefulSet) { s.Spec.Template.Spec.ServiceAccountName = "admin" }))).To(deniedBy("ServiceAccount"))
		Expect(c.Create(ctx, fleetSet(func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Containers[0].SecurityContext.Privileged, s.Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true), nil
		}))).To(deniedBy("not privileged"))
	})

	It("refuses a Deployment a Memcached does not control, or not labelled as its", func(ctx SpecContext) {
		Expect(c.Create(ctx, fleetDeployment(func(d *appsv1.Deployment) { d.OwnerReferences = nil }))).To(deniedBy("controls"))
		Expect(c.Create(ctx, fleetDeployment(func(d *appsv1.Deployment) {
			d.OwnerReferences[0].APIVersion, d.OwnerReferences[0].Kind, d.OwnerReferences[0].BlockOwnerDeletion = "apps/v1", "ReplicaSet", nil
		}))).To(deniedBy("controls"))
		Expect(c.Create(ctx, fleetDeployment(func(d *appsv1.Deployment) { d.OwnerReferences[0].Controller = ptr.To(false) }))).To(deniedBy("controls"))
		Expect(c.Create(ctx, fleetDeployment(func(d *appsv1.Deployment) { d.OwnerReferences[0].Name = "another" }))).To(deniedBy("controls"),
			"the instance label names the owner")
		Expect(c.Create(ctx, fleetDeployment(func(d *appsv1.Deployment) { delete(d.Labels, desired.LabelManagedBy) }))).To(deniedBy("controls"))
	})

	It("refuses a fleet Deployment whose pods would get powers the operator never gives", func(ctx SpecContext) {
		for what, mutate := range map[string]func(*corev1.PodSpec){
			"ServiceAccount":    func(p *corev1.PodSpec) { p.ServiceAccountName = "admin" },
			"without its token": func(p *corev1.PodSpec) { p.AutomountServiceAccountToken = ptr.To(true) },
			"host namespace":    func(p *corev1.PodSpec) { p.HostNetwork = true },
			"share no host":     func(p *corev1.PodSpec) { p.HostPID = true },
			"no host path": func(p *corev1.PodSpec) {
				p.Volumes = append(p.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			},
			"not privileged": func(p *corev1.PodSpec) {
				p.Containers[0].SecurityContext.Privileged, p.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true), nil
			},
			"cannot escalate": func(p *corev1.PodSpec) { p.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true) },
			"add no capability": func(p *corev1.PodSpec) {
				p.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
			},
			"host port": func(p *corev1.PodSpec) { p.Containers[0].Ports[0].HostPort = 80 },
			"an init container too": func(p *corev1.PodSpec) {
				p.InitContainers = []corev1.Container{{Name: "x", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
			},
		} {
			By(what)
			message := what
			if what == "an init container too" {
				message = "not privileged"
			}
			Expect(c.Create(ctx, fleetDeployment(func(d *appsv1.Deployment) { mutate(&d.Spec.Template.Spec) }))).To(deniedBy(message))
		}
	})

	It("refuses taking over an object someone else made", func(ctx SpecContext) {
		// A budget: the operator may delete budgets, so the API server's
		// owner-reference check lets the patch through to the policy.
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: fresh("theirs"), Labels: map[string]string{"team": "a"}},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
		Expect(k8sClient.Create(ctx, pdb)).To(Succeed())
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q,%q:"guarded",%q:%q},"ownerReferences":[{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","name":"guarded","uid":%q,"controller":true}]}}`,
			desired.LabelName, desired.NameValue, desired.LabelInstance, desired.LabelManagedBy, desired.ManagedByValue, owner.UID)
		Expect(c.Patch(ctx, pdb, client.RawPatch(types.MergePatchType, []byte(patch)))).To(deniedBy("controls"), "labels and an owner reference added to someone's budget")
		Expect(c.Delete(ctx, pdb)).To(deniedBy("controls"), "the operator deletes only its fleets' budgets")
		np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: fresh("theirs")}}
		Expect(k8sClient.Create(ctx, np)).To(Succeed())
		Expect(c.Delete(ctx, np)).To(deniedBy("controls"))
	})

	It("refuses a fleet Service that would reach outside the cluster", func(ctx SpecContext) {
		svc := func(mutate func(*corev1.Service)) *corev1.Service {
			s := converted[corev1.Service](desired.Service(owner, spec))
			s.Name = fresh("guarded")
			mutate(s)
			return s
		}
		Expect(c.Create(ctx, svc(func(s *corev1.Service) { s.Spec.ClusterIP = ""; s.Spec.Type = corev1.ServiceTypeNodePort }))).To(deniedBy("ClusterIP"))
		Expect(c.Create(ctx, svc(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.1"} }))).To(deniedBy("external IPs"))
		Expect(c.Create(ctx, svc(func(s *corev1.Service) { s.OwnerReferences = nil }))).To(deniedBy("controls"))
	})

	It("lets the operator change only the deletion cost of its fleets' pods", func(ctx SpecContext) {
		pod := func(labels map[string]string) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: fresh("pod"), Labels: labels, Annotations: map[string]string{"kept": "yes"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}}}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			return p
		}
		merge := func(p *corev1.Pod, patch string) error {
			return c.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		fleet := pod(map[string]string{desired.LabelName: desired.NameValue, desired.LabelInstance: "guarded", desired.LabelManagedBy: desired.ManagedByValue})
		Expect(merge(fleet, `{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"-2147483648"}}}`)).To(Succeed())
		Expect(merge(fleet, `{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":null}}}`)).To(Succeed())
		Expect(merge(fleet, `{"metadata":{"annotations":{"other":"x"}}}`)).To(deniedBy("pod-deletion-cost"))
		Expect(merge(fleet, `{"metadata":{"annotations":{"kept":null}}}`)).To(deniedBy("pod-deletion-cost"))
		Expect(merge(fleet, `{"metadata":{"labels":{"app.kubernetes.io/instance":"elsewhere"}}}`)).To(deniedBy("pod-deletion-cost"))
		Expect(merge(fleet, `{"spec":{"containers":[{"name":"memcached","image":"evil:1"}]}}`)).To(deniedBy("pod-deletion-cost"))
		Expect(merge(fleet, `{"metadata":{"finalizers":["example.com/hold"]}}`)).To(deniedBy("pod-deletion-cost"))

		stranger := pod(map[string]string{"app": "web"})
		Expect(merge(stranger, `{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"1"}}}`)).To(deniedBy("pods of the fleets"))
		Expect(c.Delete(ctx, fleet)).To(deniedBy("deletes only pods of its fleets with warm restarts"))
		Expect(c.Delete(ctx, stranger)).To(deniedBy("deletes only pods"))
	})

	It("lets the operator roll the pods of a fleet with warm restarts: memcached's image and command line and the revision label, or the whole pod", func(ctx SpecContext) {
		warm := func() *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: fresh("warm"),
				Labels:      map[string]string{desired.LabelName: desired.NameValue, desired.LabelInstance: "guarded", desired.LabelManagedBy: desired.ManagedByValue, "controller-revision-hash": "r1"},
				Annotations: map[string]string{desired.TemplateAnnotation: "t1"}},
				Spec: corev1.PodSpec{
					InitContainers: []corev1.Container{{Name: "install-launcher", Image: "op:1"}},
					Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6", Resources: memoryLimit("128Mi")},
						{Name: "exporter", Image: "op:1", Resources: memoryLimit("32Mi")}}}}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			return p
		}
		strategic := func(p *corev1.Pod, patch string) error {
			return c.Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))
		}
		p := warm()
		Expect(strategic(p, `{"metadata":{"labels":{"controller-revision-hash":"r2"}},"spec":{"containers":[{"name":"memcached","image":"memcached:1.6.2"}]}}`)).To(Succeed())
		Expect(strategic(p, `{"spec":{"containers":[{"name":"exporter","image":"evil:1"}]}}`)).To(deniedBy("memcached's image"))
		Expect(strategic(p, `{"spec":{"initContainers":[{"name":"install-launcher","image":"evil:1"}]}}`)).To(deniedBy("memcached's image"))
		Expect(c.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"tolerations":[{"key":"x","operator":"Exists","effect":"NoSchedule"}]}}`)))).To(deniedBy("memcached's image"))
		Expect(strategic(p, `{"metadata":{"labels":{"app.kubernetes.io/instance":"elsewhere"}}}`)).To(deniedBy("memcached's image"))
		Expect(strategic(p, `{"metadata":{"annotations":{"`+desired.TemplateAnnotation+`":"t2"}}}`)).To(deniedBy("memcached's image"))
		Expect(strategic(p, `{"metadata":{"annotations":{"`+desired.ArgsAnnotation+`":"[\"-c\",\"2048\"]","`+desired.RestartsAnnotation+`":"0"}}}`)).To(Succeed(),
			"memcached's command line, in place")
		Expect(strategic(p, `{"metadata":{"annotations":{"other":"x"}}}`)).To(deniedBy("memcached's image"))
		Expect(c.Delete(ctx, p)).To(Succeed())

		By("memcached's resources in place, through the resize subresource, and no other container's")
		p = warm()
		resize := func(p *corev1.Pod, container, memory string) error {
			patch := `{"spec":{"containers":[{"name":"` + container + `","resources":{"limits":{"memory":"` + memory + `"},"requests":{"memory":"` + memory + `"}}}]}}`
			return c.SubResource("resize").Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))
		}
		Expect(resize(p, "memcached", "160Mi")).To(Succeed())
		Expect(resize(p, "exporter", "1Gi")).To(deniedBy("resizes only memcached's container"))
		Expect(c.Delete(ctx, p)).To(Succeed())

		By("not the command line of a pod of a fleet without warm restarts")
		fleet := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: fresh("cold"),
			Labels: map[string]string{desired.LabelName: desired.NameValue, desired.LabelInstance: "guarded", desired.LabelManagedBy: desired.ManagedByValue}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6", Resources: memoryLimit("128Mi")}}}}
		Expect(k8sClient.Create(ctx, fleet)).To(Succeed())
		Expect(strategic(fleet, `{"metadata":{"annotations":{"`+desired.ArgsAnnotation+`":"[]"}}}`)).To(deniedBy("memcached's image"))
		Expect(c.SubResource("resize").Patch(ctx, fleet, client.RawPatch(types.StrategicMergePatchType,
			[]byte(`{"spec":{"containers":[{"name":"memcached","resources":{"limits":{"memory":"1Gi"},"requests":{"memory":"1Gi"}}}]}}`)))).To(deniedBy("resizes only memcached's container"))

		By("and nobody else changes a warm pod's command line")
		p = warm()
		Expect(strategic(p, `{"metadata":{"annotations":{"`+desired.ArgsAnnotation+`":"[\"-c\",\"1024\",\"-Y\",\"/auth\"]"}}}`)).To(Succeed())
		admin := func(patch string) error {
			return k8sClient.Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))
		}
		// In force once it refuses; each try a new command line, so that one
		// admitted before then is no change to the next.
		Eventually(func() error {
			return admin(`{"metadata":{"annotations":{"` + desired.ArgsAnnotation + `":"[\"-c\",\"` + fresh("") + `\"]"}}}`)
		}).WithTimeout(verbWait).Should(deniedBy("the operator's to change"), "authentication dropped by a pod patch")
		Expect(admin(`{"metadata":{"annotations":{"` + desired.ArgsAnnotation + `":null}}}`)).To(deniedBy("the operator's to change"))
		Expect(admin(`{"metadata":{"annotations":{"` + desired.RestartsAnnotation + `":"9"}}}`)).To(deniedBy("the operator's to change"))
		Expect(admin(`{"metadata":{"annotations":{"team":"a"}}}`)).To(Succeed(), "other annotations stay anyone's")
	})

	It("lets the operator mark its webhook configurations' caBundle seen, and change nothing else of them", func(ctx SpecContext) {
		name := rel + "-memcached-operator"
		rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"example.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"things"}}}}
		hook := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://x.invalid/"), CABundle: []byte("injected")}
		none := admissionregistrationv1.SideEffectClassNone
		meta := metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/instance": rel},
			Annotations: map[string]string{"cert-manager.io/inject-ca-from": ns + "/" + name}}
		for _, cfg := range []client.Object{
			&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta,
				Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.example.invalid", ClientConfig: hook, Rules: rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}},
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta,
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.example.invalid", ClientConfig: hook, Rules: rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}},
		} {
			Expect(k8sClient.Create(ctx, cfg)).To(Succeed())
			DeferCleanup(func(ctx context.Context) { Expect(k8sClient.Delete(ctx, cfg)).To(Succeed()) })
			patch := func(kind types.PatchType, p string) error {
				return c.Patch(ctx, cfg, client.RawPatch(kind, []byte(p)))
			}
			Expect(patch(types.MergePatchType, `{"metadata":{"annotations":{"`+webhookcert.BundleSeenAnnotation+`":"a"}}}`)).To(Succeed(), "%T", cfg)
			Expect(patch(types.MergePatchType, `{"metadata":{"annotations":{"`+webhookcert.BundleSeenAnnotation+`":"b"}}}`)).To(Succeed(), "%T: marked again", cfg)
			for what, p := range map[string]string{
				"another annotation":        `{"metadata":{"annotations":{"team":"a"}}}`,
				"cainjector's annotation":   `{"metadata":{"annotations":{"cert-manager.io/inject-ca-from":null}}}`,
				"a label":                   `{"metadata":{"labels":{"app.kubernetes.io/instance":"other"}}}`,
				"a finalizer":               `{"metadata":{"finalizers":["example.invalid/hold"]}}`,
				"the failure policy":        `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`,
				"the rules":                 `[{"op":"replace","path":"/webhooks/0/rules/0/resources","value":["nothing"]}]`,
				"the namespace selector":    `[{"op":"add","path":"/webhooks/0/namespaceSelector","value":{"matchLabels":{"none":"x"}}}]`,
				"the caBundle (cainjector)": `[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"b3RoZXI="}]`,
				"the webhook's address":     `[{"op":"replace","path":"/webhooks/0/clientConfig/url","value":"https://y.invalid/"}]`,
			} {
				kind := types.JSONPatchType
				if strings.HasPrefix(p, "{") {
					kind = types.MergePatchType
				}
				Expect(patch(kind, p)).To(deniedBy("changes nothing of its webhook configurations"), "%T: %s", cfg, what)
			}
		}
	})
})

// memoryLimit is a container's memory limit, which the API server also
// makes its request.
func memoryLimit(m string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(m)}}
}
