package chart_test

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	yamlv3 "go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/chartrender"
)

const (
	release   = "memcached-operator"
	namespace = "memcached-operator-system"
	fullname  = "memcached-operator"
)

// valuesSet is one ci/*-values.yaml file, the modes the chart is linted and
// tested in.
func valuesSet(t *testing.T, name string) map[string]any {
	t.Helper()
	vals, err := readValuesSet(name)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

func readValuesSet(name string) (map[string]any, error) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartrender.ChartDir(), "ci", name+"-values.yaml"))
	if err != nil {
		return nil, fmt.Errorf("reading values set %s: %w", name, err)
	}
	return vals.AsMap(), nil
}

// rendered indexes a render by kind and namespace/name.
type rendered []*unstructured.Unstructured

func render(t *testing.T, vals map[string]any) rendered {
	t.Helper()
	objs, err := chartrender.Render(release, namespace, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return objs
}

func (r rendered) find(kind, ns, name string) *unstructured.Unstructured {
	for _, o := range r {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	return nil
}

func (r rendered) kinds() map[string]int {
	out := map[string]int{}
	for _, o := range r {
		out[o.GetKind()]++
	}
	return out
}

// get converts the object kind/ns/name to a typed object, failing the test
// when it is missing.
func get[T any](t *testing.T, r rendered, kind, ns, name string) *T {
	t.Helper()
	u := r.find(kind, ns, name)
	if u == nil {
		t.Fatalf("%s %s/%s not rendered", kind, ns, name)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s/%s does not convert to its type: %v", kind, ns, name, err)
	}
	return out
}

func generatedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartrender.ChartDir(), "generated", "role.yaml"))
	if err != nil {
		t.Fatalf("reading generated role (run make manifests): %v", err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(data, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

func operatorContainer(t *testing.T, r rendered) corev1.Container {
	t.Helper()
	dep := get[appsv1.Deployment](t, r, "Deployment", namespace, fullname)
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(dep.Spec.Template.Spec.Containers))
	}
	return dep.Spec.Template.Spec.Containers[0]
}

var allSets = []string{"default", "namespace-scoped", "no-cert-manager", "no-cert-manager-helm", "ha"}

// TestEveryValuesSet holds what every mode must render the same way.
func TestEveryValuesSet(t *testing.T) {
	for _, set := range allSets {
		t.Run(set, func(t *testing.T) {
			g := NewWithT(t)
			r := render(t, valuesSet(t, set))

			for _, o := range r {
				g.Expect(o.GetName()).To(HavePrefix(fullname), "%s %s is not named from fullname", o.GetKind(), o.GetName())
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/name", "memcached-operator"), o.GetKind())
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/instance", release), o.GetKind())
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), o.GetKind())
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("helm.sh/chart", "memcached-operator-0.1.0"), o.GetKind())
				g.Expect(o.GetLabels()).To(HaveKey("app.kubernetes.io/component"), o.GetKind())
			}

			dep := get[appsv1.Deployment](t, r, "Deployment", namespace, fullname)
			selector := map[string]string{
				"app.kubernetes.io/name":      "memcached-operator",
				"app.kubernetes.io/instance":  release,
				"app.kubernetes.io/component": "operator",
			}
			g.Expect(dep.Spec.Selector.MatchLabels).To(Equal(selector), "selectors use only name/instance/component")
			for _, svc := range []string{fullname + "-webhook", fullname + "-metrics"} {
				g.Expect(get[corev1.Service](t, r, "Service", namespace, svc).Spec.Selector).To(Equal(selector), svc)
			}

			pod := dep.Spec.Template.Spec
			g.Expect(pod.ServiceAccountName).To(Equal(fullname))
			g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
			g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
			c := pod.Containers[0]
			g.Expect(c.Image).To(Equal("example.com/memcached-operator:0.1.0"))
			g.Expect(c.Command).To(Equal([]string{"/memcached-operator"}))
			g.Expect(*c.SecurityContext.RunAsUser).To(BeEquivalentTo(65532))
			g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
			g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
			g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
			g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
			g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
			certArgs := []string{"--metrics-cert-dir=/tmp/k8s-webhook-server/serving-certs", "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs"}
			if set == "no-cert-manager" {
				certArgs = []string{"--metrics-use-webhook-cert=true", "--webhook-cert-management=operator"}
			}
			g.Expect(c.Args).To(ContainElements(certArgs))
			g.Expect(c.Args).To(ContainElements(
				"--metrics-bind-address=:8443",
				"--health-probe-bind-address=:8081",
				"--leader-elect=true",
				"--leader-election-namespace="+namespace,
				"--max-concurrent-reconciles=16",
				"--status-progress-interval=10s",
				"--status-progress-rate=2",
				"--webhook-port=9443",
				"--max-size=100",
				"--default-image=memcached:1.6",
				"--exporter-image="+c.Image,
				"--enable-http2=false",
				"--zap-log-level=info",
				"--zap-encoder=json",
			))

			if set == "no-cert-manager" {
				// The operator serves its certificate from memory: nothing mounted.
				g.Expect(c.VolumeMounts).To(BeEmpty())
				g.Expect(pod.Volumes).To(BeEmpty())
			} else {
				// The webhook certificate's Secret is where --webhook-cert-dir reads it.
				g.Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{
					Name: "webhook-certs", MountPath: "/tmp/k8s-webhook-server/serving-certs", ReadOnly: true,
				}))
				g.Expect(pod.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", fullname+"-webhook-tls")))
			}

			checkWebhooks(t, r)
			checkLeaderElectionAndMetricsRBAC(t, r)

			// helm test: a hook pod running the check binary from the operator image.
			check := get[corev1.Pod](t, r, "Pod", namespace, fullname+"-test-check")
			g.Expect(check.Annotations).To(HaveKeyWithValue("helm.sh/hook", "test"))
			g.Expect(check.Annotations).To(HaveKeyWithValue("helm.sh/hook-delete-policy", "before-hook-creation"))
			g.Expect(check.Spec.Containers[0].Image).To(Equal(c.Image))
			g.Expect(check.Spec.Containers[0].Command).To(Equal([]string{"/memcached-operator-check"}))
			g.Expect(check.Spec.ServiceAccountName).To(Equal(fullname + "-test"))
			// `helm test --logs` reads every test hook's logs as a pod's.
			for _, o := range r {
				if o.GetAnnotations()["helm.sh/hook"] == "test" {
					g.Expect(o.GetKind()).To(Equal("Pod"), "test hook %s/%s", o.GetKind(), o.GetName())
				}
			}
		})
	}
}

func checkWebhooks(t *testing.T, r rendered) {
	t.Helper()
	g := NewWithT(t)
	mwc := get[admissionregistrationv1.MutatingWebhookConfiguration](t, r, "MutatingWebhookConfiguration", "", fullname)
	vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "", fullname)
	g.Expect(mwc.Webhooks).To(HaveLen(1))
	g.Expect(vwc.Webhooks).To(HaveLen(2))

	type hook struct {
		path     string
		cfg      admissionregistrationv1.WebhookClientConfig
		rules    []admissionregistrationv1.RuleWithOperations
		common   admissionregistrationv1.ValidatingWebhook
		resource string
	}
	m := mwc.Webhooks[0]
	hooks := []hook{{
		path: "/mutate-cache-example-com-v1alpha1-memcached", cfg: m.ClientConfig, rules: m.Rules, resource: "memcacheds",
		common: admissionregistrationv1.ValidatingWebhook{
			FailurePolicy: m.FailurePolicy, TimeoutSeconds: m.TimeoutSeconds, SideEffects: m.SideEffects,
			MatchPolicy: m.MatchPolicy, AdmissionReviewVersions: m.AdmissionReviewVersions, NamespaceSelector: m.NamespaceSelector,
		},
	}}
	for i, path := range []string{"/validate-cache-example-com-v1alpha1-memcached", "/validate-cache-example-com-v1alpha1-memcached-scale"} {
		v := vwc.Webhooks[i]
		hooks = append(hooks, hook{path: path, cfg: v.ClientConfig, rules: v.Rules, common: v, resource: map[int]string{0: "memcacheds", 1: "memcacheds/scale"}[i]})
	}
	for _, h := range hooks {
		g.Expect(h.cfg.Service.Name).To(Equal(fullname + "-webhook"))
		g.Expect(h.cfg.Service.Namespace).To(Equal(namespace))
		g.Expect(*h.cfg.Service.Path).To(Equal(h.path))
		g.Expect(*h.cfg.Service.Port).To(BeEquivalentTo(443))
		g.Expect(h.rules).To(HaveLen(1))
		g.Expect(h.rules[0].Resources).To(Equal([]string{h.resource}))
		g.Expect(h.rules[0].APIGroups).To(Equal([]string{"cache.example.com"}))
		g.Expect(*h.common.FailurePolicy).To(Equal(admissionregistrationv1.Fail))
		g.Expect(*h.common.TimeoutSeconds).To(BeEquivalentTo(10))
		g.Expect(*h.common.SideEffects).To(Equal(admissionregistrationv1.SideEffectClassNone))
		g.Expect(*h.common.MatchPolicy).To(Equal(admissionregistrationv1.Equivalent))
		g.Expect(h.common.AdmissionReviewVersions).To(Equal([]string{"v1"}))
		g.Expect(h.common.NamespaceSelector.MatchExpressions).To(ContainElement(HaveField("Values", ConsistOf(namespace, "kube-system"))),
			"the operator's namespace and kube-system are never sent to the webhooks")
	}
	g.Expect(vwc.Webhooks[1].Rules[0].Operations).To(ConsistOf(admissionregistrationv1.Update))
}

func checkLeaderElectionAndMetricsRBAC(t *testing.T, r rendered) {
	t.Helper()
	g := NewWithT(t)
	le := get[rbacv1.Role](t, r, "Role", namespace, fullname+"-leader-election")
	g.Expect(le.Rules).To(ContainElement(And(
		HaveField("APIGroups", ConsistOf("coordination.k8s.io")),
		HaveField("Resources", ConsistOf("leases")),
		HaveField("Verbs", ContainElements("get", "create", "update")),
	)))
	leb := get[rbacv1.RoleBinding](t, r, "RoleBinding", namespace, fullname+"-leader-election")
	g.Expect(leb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}))

	auth := get[rbacv1.ClusterRole](t, r, "ClusterRole", "", fullname+"-metrics-auth")
	g.Expect(auth.Rules).To(ConsistOf(
		HaveField("Resources", ConsistOf("tokenreviews")),
		HaveField("Resources", ConsistOf("subjectaccessreviews")),
	))
	authb := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "", fullname+"-metrics-auth")
	g.Expect(authb.RoleRef.Name).To(Equal(fullname + "-metrics-auth"))
	g.Expect(authb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}))
}

// TestLintStrict is `helm lint --strict` through the SDK, so `make test` lints
// every values set without the CLI (`make helm-lint` runs the CLI too).
func TestLintStrict(t *testing.T) {
	for _, set := range allSets {
		t.Run(set, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = namespace
			lint.KubeVersion = &chartrender.KubeVersion
			result := lint.Run([]string{chartrender.ChartDir()}, valuesSet(t, set))
			for _, msg := range result.Messages {
				t.Log(msg)
			}
			if len(result.Errors) > 0 {
				t.Errorf("helm lint --strict: %v", result.Errors)
			}
		})
	}
}

// TestNoRoleGrantsSecrets: in every values set the chart ships, no role
// grants anything on Secrets but the operator's own webhook certificate's,
// by name, in its namespace. The auth Secret's existence is learnt from the
// fleet's pods.
func TestNoRoleGrantsSecrets(t *testing.T) {
	for _, set := range append(slices.Clone(allSets), "no-cert-manager without the write policy") {
		t.Run(set, func(t *testing.T) {
			name, withoutPolicy := strings.CutSuffix(set, " without the write policy")
			vals := valuesSet(t, name)
			if withoutPolicy {
				vals["rbac"] = map[string]any{"writePolicy": false}
			}
			objs := render(t, vals)
			for _, o := range objs {
				if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
					continue
				}
				role := get[rbacv1.Role](t, rendered{o}, o.GetKind(), o.GetNamespace(), o.GetName())
				for _, rule := range role.Rules {
					if !slices.Contains(rule.Resources, "secrets") && !slices.Contains(rule.Resources, "*") {
						continue
					}
					// create cannot be bounded by name in RBAC: the write
					// policy, rendered with it, bounds it to that Secret.
					named := slices.Equal(rule.ResourceNames, []string{fullname + "-webhook-certs"}) ||
						(slices.Equal(rule.Verbs, []string{"create"}) && objs.find("ValidatingAdmissionPolicy", "", fullname+"-operator-writes") != nil)
					own := o.GetKind() == "Role" && o.GetNamespace() == namespace && o.GetName() == fullname+"-webhook-certs" && named
					if !own {
						t.Errorf("%s %s/%s grants %v on secrets %v", o.GetKind(), o.GetNamespace(), o.GetName(), rule.Verbs, rule.ResourceNames)
					}
				}
			}
		})
	}
}

// TestNoPolicyTakesParams: no admission policy the chart ships reads a
// parameter object. The API server stops a built-in kind's param informer
// for good once no binding names that kind, and then judges with stale
// parameters (paramkind_test.go).
func TestNoPolicyTakesParams(t *testing.T) {
	for _, set := range allSets {
		t.Run(set, func(t *testing.T) {
			for _, o := range render(t, valuesSet(t, set)) {
				if !strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && !strings.HasPrefix(o.GetKind(), "MutatingAdmissionPolicy") {
					continue
				}
				for _, field := range [][]string{{"spec", "paramKind"}, {"spec", "paramRef"}} {
					if _, found, _ := unstructured.NestedFieldNoCopy(o.Object, field...); found {
						t.Errorf("%s %s sets %s", o.GetKind(), o.GetName(), strings.Join(field, "."))
					}
				}
			}
		})
	}
}

// TestShutdownFitsTheGracePeriod: for every preStop delay the schema
// admits, the delay and the operator's graceful shutdown end before the
// kubelet kills the pod, so a leader releases its Lease.
func TestShutdownFitsTheGracePeriod(t *testing.T) {
	for _, delay := range []int{0, 5, 20} {
		r := render(t, map[string]any{"operator": map[string]any{"shutdownDelaySeconds": delay}})
		c := operatorContainer(t, r)
		var shutdown time.Duration
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--graceful-shutdown-timeout="); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Fatal(err)
				}
				shutdown = d
			}
		}
		grace := time.Duration(*get[appsv1.Deployment](t, r, "Deployment", namespace, fullname).Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
		if shutdown <= 0 || time.Duration(delay)*time.Second+shutdown > grace-5*time.Second {
			t.Errorf("preStop %ds + graceful shutdown %s leave less than 5 s of the %s grace period", delay, shutdown, grace)
		}
	}
}

func TestDefaultValues(t *testing.T) {
	g := NewWithT(t)
	r := render(t, valuesSet(t, "default"))

	role := get[rbacv1.ClusterRole](t, r, "ClusterRole", "", fullname)
	g.Expect(role.Rules).To(Equal(generatedRules(t)), "the operator's rules are the kubebuilder markers'")
	crb := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "", fullname)
	g.Expect(crb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: fullname}))
	// Two replicas, on different nodes where the cluster has them, and a
	// budget that lets a drain evict only one: admission never waits on a
	// restarting operator.
	dep := get[appsv1.Deployment](t, r, "Deployment", namespace, fullname)
	g.Expect(*dep.Spec.Replicas).To(BeEquivalentTo(2))
	g.Expect(dep.Spec.Template.Spec.Affinity).To(Equal(&corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
			TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: dep.Spec.Selector.MatchLabels},
		}}},
	}}))
	pdb := get[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", namespace, fullname)
	g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(dep.Spec.Selector.MatchLabels))
	g.Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))
	g.Expect(operatorContainer(t, r).Args).To(ContainElement("--leader-elect=true"))
	g.Expect(r.kinds()).NotTo(HaveKey("Secret"), "cert-manager writes the certificate Secret")
	g.Expect(r.kinds()).NotTo(HaveKey("NetworkPolicy"))
	g.Expect(r.kinds()).NotTo(HaveKey("ServiceMonitor"))
	g.Expect(operatorContainer(t, r).Args).NotTo(ContainElement(HavePrefix("--watch-namespaces")))
	g.Expect(operatorContainer(t, r).Args).NotTo(ContainElement(HavePrefix("--default-apparmor-profile")), "no AppArmor profile: the kubelet refuses it on nodes without AppArmor")
	// The garbage collector works harder near 90% of the memory limit, read
	// through the downward API; at the request it ran almost without pause.
	g.Expect(operatorContainer(t, r).Args).To(ContainElements("--memory-target=90%", "--memory-limit=$(MEMORY_LIMIT)"))
	// The pod keeps serving admission while the webhook Service drops it:
	// without the delay a drain refused a request (connection refused).
	g.Expect(operatorContainer(t, r).Lifecycle).To(Equal(&corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}))
	g.Expect(operatorContainer(t, r).Env).To(ContainElement(corev1.EnvVar{Name: "MEMORY_LIMIT",
		ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}))

	// The CA chain: self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate.
	selfSigned := r.find("Issuer", namespace, fullname+"-selfsigned")
	g.Expect(selfSigned).NotTo(BeNil())
	g.Expect(selfSigned.Object).To(HaveKeyWithValue("spec", HaveKey("selfSigned")))
	ca := r.find("Certificate", namespace, fullname+"-ca")
	g.Expect(ca).NotTo(BeNil())
	g.Expect(field(ca.Object, "spec", "isCA")).To(BeTrue())
	g.Expect(field(ca.Object, "spec", "issuerRef", "name")).To(Equal(fullname + "-selfsigned"))
	caIssuer := r.find("Issuer", namespace, fullname+"-ca")
	g.Expect(caIssuer).NotTo(BeNil())
	g.Expect(field(caIssuer.Object, "spec", "ca", "secretName")).To(Equal(fullname + "-ca"))
	serving := r.find("Certificate", namespace, fullname+"-webhook")
	g.Expect(serving).NotTo(BeNil())
	g.Expect(field(serving.Object, "spec", "issuerRef", "name")).To(Equal(fullname + "-ca"))
	g.Expect(field(serving.Object, "spec", "secretName")).To(Equal(fullname + "-webhook-tls"))
	g.Expect(field(serving.Object, "spec", "dnsNames")).To(ConsistOf(
		fullname+"-webhook",
		fullname+"-webhook."+namespace,
		fullname+"-webhook."+namespace+".svc",
		fullname+"-webhook."+namespace+".svc.cluster.local",
		fullname+"-metrics",
		fullname+"-metrics."+namespace,
		fullname+"-metrics."+namespace+".svc",
		fullname+"-metrics."+namespace+".svc.cluster.local",
	), "the operator serves webhooks and metrics with this certificate")
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		wh := r.find(kind, "", fullname)
		g.Expect(wh.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", namespace+"/"+fullname+"-webhook"), kind)
		hooks, _, _ := unstructured.NestedSlice(wh.Object, "webhooks")
		for _, h := range hooks {
			g.Expect(h).NotTo(HaveKeyWithValue("clientConfig", HaveKey("caBundle")), "cainjector owns the caBundle")
		}
	}

	// Aggregated roles let namespace admins and editors manage Memcacheds.
	admin := get[rbacv1.ClusterRole](t, r, "ClusterRole", "", fullname+"-admin")
	g.Expect(admin.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-admin", "true"))
	g.Expect(admin.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-edit", "true"))
	view := get[rbacv1.ClusterRole](t, r, "ClusterRole", "", fullname+"-view")
	g.Expect(view.Labels).To(HaveKeyWithValue("rbac.authorization.k8s.io/aggregate-to-view", "true"))
	for _, rule := range view.Rules {
		g.Expect(rule.Verbs).To(ConsistOf("get", "list", "watch"))
	}

	// The test hook's RBAC is only what the check does.
	testRole := get[rbacv1.Role](t, r, "Role", "default", fullname+"-test")
	g.Expect(testRole.Rules).To(ConsistOf(rbacv1.PolicyRule{
		APIGroups: []string{"cache.example.com"}, Resources: []string{"memcacheds"}, Verbs: []string{"create"},
	}))
	check := get[corev1.Pod](t, r, "Pod", namespace, fullname+"-test-check")
	g.Expect(check.Spec.Containers[0].Args).To(ContainElements("--namespace=default", "--memcached=false", "--max-size=100"))
}

func TestNamespaceScopedValues(t *testing.T) {
	g := NewWithT(t)
	r := render(t, valuesSet(t, "namespace-scoped"))
	watched := []string{"team-a", "team-b"}

	g.Expect(r.find("ClusterRole", "", fullname)).To(BeNil(), "no cluster-wide access to Memcacheds or workloads")
	g.Expect(r.find("ClusterRoleBinding", "", fullname)).To(BeNil())
	g.Expect(r.find("ClusterRole", "", fullname+"-admin")).To(BeNil(), "aggregateClusterRoles=false")
	for _, ns := range watched {
		role := get[rbacv1.Role](t, r, "Role", ns, fullname)
		g.Expect(role.Rules).To(Equal(generatedRules(t)))
		rb := get[rbacv1.RoleBinding](t, r, "RoleBinding", ns, fullname)
		g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: fullname}))
		g.Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}))
	}
	g.Expect(operatorContainer(t, r).Args).To(ContainElement("--watch-namespaces=team-a,team-b"))

	vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "", fullname)
	for _, h := range vwc.Webhooks {
		g.Expect(h.NamespaceSelector.MatchExpressions).To(ContainElement(And(
			HaveField("Operator", BeEquivalentTo("In")),
			HaveField("Values", Equal(watched)),
		)), "one tenant's operator never judges another's Memcacheds")
	}
	g.Expect(r.find("Role", "team-a", fullname+"-test")).NotTo(BeNil(), "helm test runs in the first watched namespace")
}

func TestNoCertManagerHelmValues(t *testing.T) {
	g := NewWithT(t)
	r := render(t, valuesSet(t, "no-cert-manager-helm"))

	for _, kind := range []string{"Issuer", "Certificate"} {
		g.Expect(r.kinds()).NotTo(HaveKey(kind))
	}
	secret := get[corev1.Secret](t, r, "Secret", namespace, fullname+"-webhook-tls")
	g.Expect(secret.Type).To(Equal(corev1.SecretTypeTLS))
	caPEM := secret.Data["ca.crt"]
	g.Expect(caPEM).NotTo(BeEmpty())

	// The caBundle of every webhook is the CA that signed the served certificate.
	mwc := get[admissionregistrationv1.MutatingWebhookConfiguration](t, r, "MutatingWebhookConfiguration", "", fullname)
	vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "", fullname)
	g.Expect(mwc.Annotations).NotTo(HaveKey("cert-manager.io/inject-ca-from"))
	bundles := [][]byte{mwc.Webhooks[0].ClientConfig.CABundle}
	for _, h := range vwc.Webhooks {
		bundles = append(bundles, h.ClientConfig.CABundle)
	}
	for _, b := range bundles {
		g.Expect(b).To(Equal(caPEM), "webhook configurations and Secret rendered from one CA")
	}

	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue())
	block, _ := pem.Decode(secret.Data["tls.crt"])
	g.Expect(block).NotTo(BeNil())
	cert, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	for _, name := range []string{fullname + "-webhook." + namespace + ".svc", fullname + "-webhook." + namespace + ".svc.cluster.local", fullname + "-metrics." + namespace + ".svc"} {
		_, err = cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		g.Expect(err).NotTo(HaveOccurred(), name)
	}
	keyBlock, _ := pem.Decode(secret.Data["tls.key"])
	g.Expect(keyBlock).NotTo(BeNil())
}

func TestHAValues(t *testing.T) {
	g := NewWithT(t)
	r := render(t, valuesSet(t, "ha"))

	dep := get[appsv1.Deployment](t, r, "Deployment", namespace, fullname)
	g.Expect(*dep.Spec.Replicas).To(BeEquivalentTo(2))
	g.Expect(dep.Spec.Template.Spec.PriorityClassName).To(Equal("system-cluster-critical"))
	g.Expect(dep.Spec.Template.Spec.TopologySpreadConstraints).To(HaveLen(1))
	g.Expect(dep.Spec.Template.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels).To(Equal(dep.Spec.Selector.MatchLabels),
		"a constraint without a selector spreads the operator's own pods")

	pdb := get[policyv1.PodDisruptionBudget](t, r, "PodDisruptionBudget", namespace, fullname)
	g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(dep.Spec.Selector.MatchLabels))
	g.Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))
	g.Expect(pdb.Spec.MinAvailable).To(BeNil())

	np := get[networkingv1.NetworkPolicy](t, r, "NetworkPolicy", namespace, fullname)
	g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(dep.Spec.Selector.MatchLabels))
	var ports []string
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			ports = append(ports, p.Port.String())
		}
	}
	g.Expect(ports).To(ConsistOf("webhook", "metrics"))

	testRole := get[rbacv1.Role](t, r, "Role", "default", fullname+"-test")
	g.Expect(testRole.Rules[0].Verbs).To(ConsistOf("create", "get", "list", "watch", "delete"))
	check := get[corev1.Pod](t, r, "Pod", namespace, fullname+"-test-check")
	g.Expect(check.Spec.Containers[0].Args).To(ContainElement("--memcached=true"))
}

// TestValues covers the values that are not a ci set of their own.
func TestValues(t *testing.T) {
	cases := []struct {
		name   string
		values string
		check  func(g Gomega, r rendered)
	}{{
		name:   "image digest pins the image",
		values: "image: {digest: 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}",
		check: func(g Gomega, r rendered) {
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(
				"example.com/memcached-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"))
		},
	}, {
		name:   "image.registry is joined with the repository, for the operator, its exporter sidecars and the helm-test pod",
		values: "image: {registry: '10.250.0.1:5000', repository: testbed/memcached-operator}",
		check: func(g Gomega, r rendered) {
			want := "10.250.0.1:5000/testbed/memcached-operator:0.1.0"
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(want))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--exporter-image=" + want))
			check := objAs[corev1.Pod](g, r.find("Pod", namespace, fullname+"-test-check"))
			g.Expect(check.Spec.Containers[0].Image).To(Equal(want))
		},
	}, {
		name:   "image.registry with a path prefix and a trailing slash",
		values: "image: {registry: 'registry.example.com/team/', tag: '1.2.3'}",
		check: func(g Gomega, r rendered) {
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("registry.example.com/team/example.com/memcached-operator:1.2.3"))
		},
	}, {
		name: "registry, digest and pull secrets (own and global) reach both the operator and the helm-test pod",
		values: "image: {registry: 'registry.example.com:5000', repository: ops/memcached-operator, tag: ignored, " +
			"digest: 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}\n" +
			"imagePullSecrets: [{name: own}, {name: shared}]\nglobal: {imagePullSecrets: [{name: shared}, {name: parent}]}",
		check: func(g Gomega, r rendered) {
			want := "registry.example.com:5000/ops/memcached-operator@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			secrets := []corev1.LocalObjectReference{{Name: "shared"}, {Name: "parent"}, {Name: "own"}}
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(want))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--exporter-image=" + want))
			g.Expect(dep.Spec.Template.Spec.ImagePullSecrets).To(Equal(secrets))
			check := objAs[corev1.Pod](g, r.find("Pod", namespace, fullname+"-test-check"))
			g.Expect(check.Spec.Containers[0].Image).To(Equal(want))
			g.Expect(check.Spec.ImagePullSecrets).To(Equal(secrets))
		},
	}, {
		name:   "global pull secrets alone",
		values: "global: {imagePullSecrets: [{name: parent}]}",
		check: func(g Gomega, r rendered) {
			secrets := []corev1.LocalObjectReference{{Name: "parent"}}
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.ImagePullSecrets).To(Equal(secrets))
			check := objAs[corev1.Pod](g, r.find("Pod", namespace, fullname+"-test-check"))
			g.Expect(check.Spec.ImagePullSecrets).To(Equal(secrets))
		},
	}, {
		name:   "global and own pull secrets merge, as a subchart",
		values: "global: {imagePullSecrets: [{name: parent}], somethingElse: true}\nimagePullSecrets: [{name: own}]",
		check: func(g Gomega, r rendered) {
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "parent"}, {Name: "own"}}))
		},
	}, {
		name:   "operator flags from values",
		values: "operator: {maxSize: 7, defaultImage: 'memcached:1.6.30', maxConcurrentReconciles: 4, logLevel: debug, logEncoder: console, enableHTTP2: true, leaderElection: {namespace: kube-system}, extraArgs: ['--zap-devel']}\nmetrics: {enabled: false}",
		check: func(g Gomega, r rendered) {
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Args).To(ContainElements(
				"--max-size=7", "--default-image=memcached:1.6.30", "--max-concurrent-reconciles=4",
				"--zap-log-level=debug", "--zap-encoder=console", "--enable-http2=true",
				"--leader-election-namespace=kube-system", "--metrics-bind-address=0", "--zap-devel",
			))
			g.Expect(r.find("Role", "kube-system", fullname+"-leader-election")).NotTo(BeNil())
			g.Expect(r.find("Service", namespace, fullname+"-metrics")).To(BeNil())
			g.Expect(r.find("ClusterRole", "", fullname+"-metrics-auth")).To(BeNil())
			g.Expect(dep.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--metrics-cert-dir")))
		},
	}, {
		name:   "leader election off with one replica",
		values: "replicaCount: 1\noperator: {leaderElection: {enabled: false}}",
		check: func(g Gomega, r rendered) {
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--leader-elect=false"))
			g.Expect(r.find("Role", namespace, fullname+"-leader-election")).To(BeNil())
		},
	}, {
		name:   "webhook settings from values",
		values: "webhook: {failurePolicy: Ignore, timeoutSeconds: 5, excludeNamespaces: [kube-system, kube-public], namespaceSelector: {matchLabels: {memcached: enabled}}}",
		check: func(g Gomega, r rendered) {
			vwc := objAs[admissionregistrationv1.ValidatingWebhookConfiguration](g, r.find("ValidatingWebhookConfiguration", "", fullname))
			for _, h := range vwc.Webhooks {
				g.Expect(*h.FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
				g.Expect(*h.TimeoutSeconds).To(BeEquivalentTo(5))
				g.Expect(h.NamespaceSelector.MatchLabels).To(Equal(map[string]string{"memcached": "enabled"}))
				g.Expect(h.NamespaceSelector.MatchExpressions).To(ContainElement(HaveField("Values", ConsistOf(namespace, "kube-system", "kube-public"))))
			}
		},
	}, {
		name:   "own issuer replaces the chart's CA chain",
		values: "certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}",
		check: func(g Gomega, r rendered) {
			g.Expect(r.find("Issuer", namespace, fullname+"-ca")).To(BeNil())
			g.Expect(r.find("Certificate", namespace, fullname+"-ca")).To(BeNil())
			cert := r.find("Certificate", namespace, fullname+"-webhook")
			g.Expect(cert.Object).To(HaveKeyWithValue("spec", HaveKeyWithValue("issuerRef",
				Equal(map[string]any{"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}))))
		},
	}, {
		name:   "serviceMonitor selects the metrics Service only",
		values: "metrics: {serviceMonitor: {enabled: true, labels: {release: prom}}}",
		check: func(g Gomega, r rendered) {
			sm := r.find("ServiceMonitor", namespace, fullname)
			g.Expect(sm).NotTo(BeNil())
			g.Expect(sm.GetLabels()).To(HaveKeyWithValue("release", "prom"))
			sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
			g.Expect(sel).To(HaveKeyWithValue("app.kubernetes.io/component", "metrics"))
			g.Expect(r.find("Service", namespace, fullname+"-metrics").GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/component", "metrics"))
			g.Expect(r.find("Service", namespace, fullname+"-webhook").GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/component", "operator"))
			endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			g.Expect(endpoints).To(ConsistOf(HaveKeyWithValue("tlsConfig", Equal(map[string]any{
				"ca":         map[string]any{"secret": map[string]any{"name": fullname + "-webhook-tls", "key": "ca.crt"}},
				"serverName": fullname + "-metrics." + namespace + ".svc",
			}))), "scrapes verify the chart's certificate")

			// Scrapes authenticate with a token of the chart's scraper, in the
			// authorization form (bearerTokenFile is deprecated and reads
			// Prometheus' own token).
			scraper := fullname + "-metrics-scraper"
			g.Expect(endpoints[0]).To(HaveKeyWithValue("honorLabels", true), "per-fleet series keep the fleet's namespace label")
			g.Expect(endpoints[0]).NotTo(HaveKey("bearerTokenFile"))
			g.Expect(endpoints[0]).To(HaveKeyWithValue("authorization", Equal(map[string]any{
				"type": "Bearer", "credentials": map[string]any{"name": scraper + "-token", "key": "token"},
			})))
			g.Expect(r.find("ServiceAccount", namespace, scraper)).NotTo(BeNil())
			secret := r.find("Secret", namespace, scraper+"-token")
			g.Expect(secret.Object).To(HaveKeyWithValue("type", "kubernetes.io/service-account-token"))
			g.Expect(secret.GetAnnotations()).To(HaveKeyWithValue("kubernetes.io/service-account.name", scraper))
			crb := objAs[rbacv1.ClusterRoleBinding](g, r.find("ClusterRoleBinding", "", scraper))
			g.Expect(crb.RoleRef.Name).To(Equal(fullname + "-metrics-reader"))
			g.Expect(crb.Subjects).To(ConsistOf(HaveField("Name", scraper)))
		},
	}, {
		name:   "serviceMonitor with the user's own scrape credentials",
		values: "metrics: {serviceMonitor: {enabled: true, authorization: {type: Bearer, credentials: {name: mine, key: t}}}}",
		check: func(g Gomega, r rendered) {
			endpoints, _, _ := unstructured.NestedSlice(r.find("ServiceMonitor", namespace, fullname).Object, "spec", "endpoints")
			g.Expect(endpoints[0]).To(HaveKeyWithValue("authorization", HaveKeyWithValue("credentials", map[string]any{"name": "mine", "key": "t"})))
			g.Expect(r.find("ServiceAccount", namespace, fullname+"-metrics-scraper")).To(BeNil())
			g.Expect(r.find("Secret", namespace, fullname+"-metrics-scraper-token")).To(BeNil())
		},
	}, {
		name:   "metrics with the operator's self-signed certificate",
		values: "metrics: {useChartCertificate: false, serviceMonitor: {enabled: true}}",
		check: func(g Gomega, r rendered) {
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--metrics-cert-dir")))
			cert := r.find("Certificate", namespace, fullname+"-webhook")
			g.Expect(field(cert.Object, "spec", "dnsNames")).NotTo(ContainElement(HavePrefix(fullname + "-metrics")))
			endpoints, _, _ := unstructured.NestedSlice(r.find("ServiceMonitor", namespace, fullname).Object, "spec", "endpoints")
			g.Expect(endpoints).To(ConsistOf(HaveKeyWithValue("tlsConfig", Equal(map[string]any{"insecureSkipVerify": true}))))
		},
	}, {
		name:   "no test hook",
		values: "test: {enabled: false}",
		check: func(g Gomega, r rendered) {
			g.Expect(r.find("Pod", namespace, fullname+"-test-check")).To(BeNil())
			g.Expect(r.find("Role", "default", fullname+"-test")).To(BeNil())
		},
	}, {
		name:   "existing ServiceAccount, no RBAC",
		values: "serviceAccount: {create: false, name: mine}\nrbac: {create: false}",
		check: func(g Gomega, r rendered) {
			g.Expect(r.kinds()).NotTo(HaveKey("ClusterRole"))
			g.Expect(r.kinds()).NotTo(HaveKey("ClusterRoleBinding"))
			g.Expect(r.find("ServiceAccount", namespace, fullname)).To(BeNil())
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.ServiceAccountName).To(Equal("mine"))
		},
	}, {
		name:   "one replica: no budget, which would block every drain",
		values: "replicaCount: 1",
		check: func(g Gomega, r rendered) {
			g.Expect(r.kinds()).NotTo(HaveKey("PodDisruptionBudget"))
		},
	}, {
		name:   "an AppArmor profile for new fleets",
		values: "operator: {defaultAppArmorProfile: RuntimeDefault}",
		check: func(g Gomega, r rendered) {
			args := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname)).Spec.Template.Spec.Containers[0].Args
			g.Expect(args).To(ContainElement("--default-apparmor-profile=RuntimeDefault"))
		},
	}, {
		name:   "hard anti-affinity",
		values: "podAntiAffinity: hard",
		check: func(g Gomega, r rendered) {
			dep := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname))
			g.Expect(dep.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
			g.Expect(dep.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(ConsistOf(corev1.PodAffinityTerm{
				TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: dep.Spec.Selector.MatchLabels},
			}))
		},
	}, {
		name:   "no anti-affinity",
		values: "podAntiAffinity: none",
		check: func(g Gomega, r rendered) {
			g.Expect(objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname)).Spec.Template.Spec.Affinity).To(BeNil())
		},
	}, {
		name:   "a user's affinity is kept, its own podAntiAffinity wins",
		values: "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [system]}]}]}}, podAntiAffinity: {}}",
		check: func(g Gomega, r rendered) {
			aff := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname)).Spec.Template.Spec.Affinity
			g.Expect(aff.NodeAffinity).NotTo(BeNil())
			g.Expect(aff.PodAntiAffinity).To(Equal(&corev1.PodAntiAffinity{}))
		},
	}, {
		name:   "a user's node affinity gets the default anti-affinity beside it",
		values: "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [system]}]}]}}}",
		check: func(g Gomega, r rendered) {
			aff := objAs[appsv1.Deployment](g, r.find("Deployment", namespace, fullname)).Spec.Template.Spec.Affinity
			g.Expect(aff.NodeAffinity).NotTo(BeNil())
			g.Expect(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		},
	}, {
		name:   "PDB with minAvailable",
		values: "replicaCount: 3\npodDisruptionBudget: {minAvailable: 2}",
		check: func(g Gomega, r rendered) {
			pdb := objAs[policyv1.PodDisruptionBudget](g, r.find("PodDisruptionBudget", namespace, fullname))
			g.Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(2))
			g.Expect(pdb.Spec.MaxUnavailable).To(BeNil())
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var vals map[string]any
			g.Expect(yaml.Unmarshal([]byte(tc.values), &vals)).To(Succeed())
			tc.check(g, render(t, vals))
		})
	}
}

// field is the value at path in obj, nil when absent.
func field(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldCopy(obj, path...)
	return v
}

func objAs[T any](g Gomega, u *unstructured.Unstructured) *T {
	g.ExpectWithOffset(1, u).NotTo(BeNil())
	out := new(T)
	g.ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true)).To(Succeed())
	return out
}

// TestInstallIntoDefault is the quick start, `helm install` with no namespace:
// helm test runs there too, so the webhooks must see it.
func TestInstallIntoDefault(t *testing.T) {
	g := NewWithT(t)
	objs, err := chartrender.Render(release, "default", nil)
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if o.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			exprs, _, _ := unstructured.NestedSlice(h.(map[string]any), "namespaceSelector", "matchExpressions")
			g.Expect(exprs).To(ConsistOf(HaveKeyWithValue("values", ConsistOf("kube-system"))))
		}
	}
}

// renderError renders with values given as YAML and returns the error.
func renderError(t *testing.T, values string) error {
	t.Helper()
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatal(err)
	}
	_, err := chartrender.Render(release, namespace, vals)
	return err
}

func TestSchemaRejects(t *testing.T) {
	cases := []struct{ values, want string }{
		{"operator: {maxSize: 0}", "/operator/maxSize"},
		{"operator: {maxSize: 1001}", "/operator/maxSize"},
		{"operator: {maxSize: '10'}", "/operator/maxSize"},
		{"operator: {logEncoder: xml}", "/operator/logEncoder"},
		{"operator: {maxConcurrentReconciles: 0}", "/operator/maxConcurrentReconciles"},
		{"operator: {shutdownDelaySeconds: 30}", "/operator/shutdownDelaySeconds"},
		{"webhook: {failurePolicy: Sometimes}", "/webhook/failurePolicy"},
		{"webhook: {timeoutSeconds: 31}", "/webhook/timeoutSeconds"},
		{"image: {pullPolicy: Sometimes}", "/image/pullPolicy"},
		{"image: {digest: latest}", "/image/digest"},
		{"image: {registry: 'https://registry.example.com'}", "/image/registry"},
		{"image: {registry: 'registry.example.com:port'}", "/image/registry"},
		{"podAntiAffinity: required", "/podAntiAffinity"},
		{"operator: {defaultAppArmorProfile: Unconfined}", "/operator/defaultAppArmorProfile"},
		{"replicas: 2", "replicas"}, // a typo of replicaCount must not be ignored silently
		{"watchNamespaces: [Team_A]", "/watchNamespaces/0"},
		{"watchNamespaces: team-a", "/watchNamespaces"},
		{"certManager: {issuerRef: {name: x, kind: Secret}}", "/certManager/issuerRef/kind"},
		{"certManager: {duration: 90d}", "/certManager/duration"},
		{"selfSignedCerts: {managedBy: cert-manager}", "/selfSignedCerts/managedBy"},
		{"replicaCount: -1", "/replicaCount"},
		{"podDisruptionBudget: {maxUnavailable: lots}", "/podDisruptionBudget/maxUnavailable"},
		{"crds: {upgrade: 'yes'}", "/crds/upgrade"},
		{"crds: {timeoutSeconds: 5}", "/crds/timeoutSeconds"},
		{"crds: {keep: true}", "/crds"},
	}
	for _, tc := range cases {
		t.Run(tc.values, func(t *testing.T) {
			err := renderError(t, tc.values)
			NewWithT(t).Expect(err).To(MatchError(And(
				ContainSubstring("values don't meet the specifications of the schema"),
				ContainSubstring(tc.want))))
		})
	}
}

func TestImpossibleCombinations(t *testing.T) {
	cases := []struct{ values, want string }{
		{"replicaCount: 2\noperator: {leaderElection: {enabled: false}}", "replicaCount > 1 needs operator.leaderElection.enabled=true"},
		{"certManager: {enabled: false, issuerRef: {name: corp-ca}}", "certManager.issuerRef is set but certManager.enabled=false"},
		{"certManager: {enabled: false}\nselfSignedCerts: {validityDays: 30, servingValidityDays: 31}", "selfSignedCerts.servingValidityDays must be at most selfSignedCerts.validityDays"},
		{"test: {namespace: kube-system}", `test.namespace "kube-system" is excluded from the webhooks`},
		{"test: {namespace: " + namespace + "}", `test.namespace "` + namespace + `" is excluded from the webhooks`},
		{"watchNamespaces: [team-a]\ntest: {namespace: team-b}", `test.namespace "team-b" is not in watchNamespaces`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			NewWithT(t).Expect(renderError(t, tc.values)).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestNotes(t *testing.T) {
	g := NewWithT(t)
	rel, err := chartrender.Release(release, namespace, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rel.Info.Notes).To(ContainSubstring("kubectl apply --server-side -f charts/memcached-operator/crds/"))
	g.Expect(rel.Info.Notes).To(ContainSubstring("helm test " + release + " -n " + namespace))
	g.Expect(rel.Info.Notes).To(ContainSubstring("kind: Memcached"))
	g.Expect(rel.Info.Notes).To(ContainSubstring("rollout status deployment/" + fullname))
}

// TestCRDsAreGenerated keeps crds/ plain: Helm installs it as is and never
// templates it, and `helm show crds` prints it.
func TestCRDsAreGenerated(t *testing.T) {
	g := NewWithT(t)
	chrt, err := chartrender.Load()
	g.Expect(err).NotTo(HaveOccurred())
	crds := chrt.CRDObjects()
	g.Expect(crds).To(HaveLen(1))
	g.Expect(string(crds[0].File.Data)).To(ContainSubstring("name: memcacheds.cache.example.com"))
	g.Expect(string(crds[0].File.Data)).NotTo(ContainSubstring("{{"))

	objs, err := chartrender.Render(release, namespace, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "CustomResourceDefinition" })).To(BeFalse())
}

// TestValuesDocumented holds every value to a helm-docs `# --` comment, so
// the generated README describes all of them. A map without one is a section
// whose children must each have one.
func TestValuesDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartrender.ChartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var undocumented []string
	var walk func(prefix string, n *yamlv3.Node)
	walk = func(prefix string, n *yamlv3.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			path := prefix + key.Value
			switch {
			case strings.Contains(key.HeadComment, "# --"):
			case val.Kind == yamlv3.MappingNode && len(val.Content) > 0:
				walk(path+".", val)
			default:
				undocumented = append(undocumented, path)
			}
		}
	}
	walk("", doc.Content[0])
	if len(undocumented) > 0 {
		t.Errorf("values without a `# --` comment: %q", undocumented)
	}
}

func TestNoCertManagerValues(t *testing.T) {
	g := NewWithT(t)
	r := render(t, valuesSet(t, "no-cert-manager"))
	for _, kind := range []string{"Issuer", "Certificate"} {
		g.Expect(r.kinds()).NotTo(HaveKey(kind))
	}
	g.Expect(r.find("Secret", namespace, fullname+"-webhook-tls")).To(BeNil())

	// An empty Secret the operator fills, owned by the release.
	secret := get[corev1.Secret](t, r, "Secret", namespace, fullname+"-webhook-certs")
	g.Expect(secret.Type).To(Equal(corev1.SecretTypeOpaque))
	g.Expect(secret.Data).To(BeEmpty())
	g.Expect(secret.StringData).To(BeEmpty())

	// No caBundle: the operator's, and an apply of the chart never touches it.
	mwc := get[admissionregistrationv1.MutatingWebhookConfiguration](t, r, "MutatingWebhookConfiguration", "", fullname)
	vwc := get[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "", fullname)
	g.Expect(mwc.Annotations).NotTo(HaveKey("cert-manager.io/inject-ca-from"))
	g.Expect(mwc.Webhooks[0].ClientConfig.CABundle).To(BeNil())
	for _, h := range vwc.Webhooks {
		g.Expect(h.ClientConfig.CABundle).To(BeNil())
	}

	// The operator told where everything is.
	svc := fullname + "-webhook"
	metricsSvc := fullname + "-metrics"
	g.Expect(operatorContainer(t, r).Args).To(ContainElements(
		"--webhook-cert-management=operator",
		"--webhook-cert-namespace="+namespace,
		"--webhook-cert-secret="+fullname+"-webhook-certs",
		"--webhook-cert-mutating-configuration="+fullname,
		"--webhook-cert-validating-configuration="+fullname,
		"--webhook-cert-dns-names="+strings.Join([]string{
			svc, svc + "." + namespace, svc + "." + namespace + ".svc", svc + "." + namespace + ".svc.cluster.local",
			metricsSvc, metricsSvc + "." + namespace, metricsSvc + "." + namespace + ".svc", metricsSvc + "." + namespace + ".svc.cluster.local",
		}, ","),
		"--webhook-cert-ca-validity=87600h",
		"--webhook-cert-validity=8760h",
		"--metrics-use-webhook-cert=true",
	))

	// RBAC for that one Secret and those two configurations only.
	role := get[rbacv1.Role](t, r, "Role", namespace, fullname+"-webhook-certs")
	g.Expect(role.Rules).To(ConsistOf(rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{fullname + "-webhook-certs"},
		Verbs: []string{"get", "update", "watch"},
	}, rbacv1.PolicyRule{
		// To create it again after a delete; the write policy bounds it.
		APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"},
	}))
	cr := get[rbacv1.ClusterRole](t, r, "ClusterRole", "", fullname+"-webhook-certs")
	g.Expect(cr.Rules).To(ConsistOf(rbacv1.PolicyRule{
		APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		ResourceNames: []string{fullname}, Verbs: []string{"get", "patch", "watch"},
	}))
	rb := get[rbacv1.RoleBinding](t, r, "RoleBinding", namespace, fullname+"-webhook-certs")
	g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: fullname + "-webhook-certs"}))
	g.Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}))
	crb := get[rbacv1.ClusterRoleBinding](t, r, "ClusterRoleBinding", "", fullname+"-webhook-certs")
	g.Expect(crb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: fullname + "-webhook-certs"}))
	g.Expect(crb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}))

	// Scrapers verify metrics against the operator's CA.
	withSM := valuesSet(t, "no-cert-manager")
	withSM["metrics"] = map[string]any{"serviceMonitor": map[string]any{"enabled": true}}
	sm := render(t, withSM).find("ServiceMonitor", namespace, fullname)
	g.Expect(sm).NotTo(BeNil())
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	g.Expect(endpoints[0]).To(HaveKeyWithValue("tlsConfig", HaveKeyWithValue("ca",
		Equal(map[string]any{"secret": map[string]any{"name": fullname + "-webhook-certs", "key": "ca.crt"}}))))

	// In the other modes: reading the two configurations and marking their
	// caBundle seen, for /readyz.
	for _, set := range []string{"default", "no-cert-manager-helm"} {
		other := render(t, valuesSet(t, set))
		g.Expect(other.find("Role", namespace, fullname+"-webhook-certs")).To(BeNil(), set)
		g.Expect(other.find("RoleBinding", namespace, fullname+"-webhook-certs")).To(BeNil(), set)
		g.Expect(get[rbacv1.ClusterRole](t, other, "ClusterRole", "", fullname+"-webhook-certs").Rules).To(ConsistOf(rbacv1.PolicyRule{
			APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
			ResourceNames: []string{fullname}, Verbs: []string{"get", "patch"},
		}), set)
		g.Expect(get[rbacv1.ClusterRoleBinding](t, other, "ClusterRoleBinding", "", fullname+"-webhook-certs").Subjects).To(
			ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}), set)
		g.Expect(operatorContainer(t, other).Args).To(ContainElements(
			"--webhook-cert-mutating-configuration="+fullname, "--webhook-cert-validating-configuration="+fullname), set)
		g.Expect(operatorContainer(t, other).Args).NotTo(ContainElement(HavePrefix("--webhook-cert-management")), set)
	}
}

// TestRendersAreStable is issue 13: GitOps tools render with `helm template`
// at every sync, where lookup finds nothing. With the operator keeping the
// certificate, two renders are the same bytes; with the chart generating it,
// every render is a new CA (which is why that mode is not for GitOps).
func TestRendersAreStable(t *testing.T) {
	g := NewWithT(t)
	manifest := func(set string) string {
		rel, err := chartrender.Release(release, namespace, valuesSet(t, set))
		g.Expect(err).NotTo(HaveOccurred())
		return rel.Manifest
	}
	g.Expect(manifest("no-cert-manager")).To(Equal(manifest("no-cert-manager")))
	g.Expect(manifest("default")).To(Equal(manifest("default")))
	g.Expect(manifest("no-cert-manager-helm")).NotTo(Equal(manifest("no-cert-manager-helm")), "helm mode mints a CA at every offline render")
}

// TestNoArchitectureConstraint: the operator's image is built for amd64 and
// arm64 (make image), so nothing the chart renders, in any values set, ties
// its pods to one architecture through a node selector or affinity.
func TestNoArchitectureConstraint(t *testing.T) {
	for _, set := range allSets {
		t.Run(set, func(t *testing.T) {
			for _, o := range render(t, valuesSet(t, set)) {
				raw, err := o.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(raw), "kubernetes.io/arch") {
					t.Errorf("%s %s is constrained to an architecture: %s", o.GetKind(), o.GetName(), raw)
				}
			}
		})
	}
}
