package chart_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/action"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/memcached"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/test/chartrender"
	"github.com/example/memcached-operator/test/testenv"
)

// The envtest tier: every rendered object against a real API server with our
// CRD and cert-manager's, and the chart's RBAC proved by running the real
// reconciler as the chart's ServiceAccount.

var (
	env       *envtest.Environment
	restCfg   *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()
)

func TestEnvtest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "chart envtest")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))

	var err error
	env, err = testenv.New(testenv.Options{CertManagerCRDs: true, ServiceMonitorCRD: true})
	Expect(err).NotTo(HaveOccurred())
	restCfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	k8sClient, err = client.New(restCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// Helm does not create the namespaces a release writes to, apart from its own
	// with --create-namespace; watched namespaces exist before install.
	for _, ns := range []string{namespace, "team-a", "team-b", "mc-cluster-system", "mc-tenant-system", "mc-upgrade-system", "other"} {
		Expect(k8sClient.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	}
	// The operator's namespace enforces the restricted Pod Security Standard,
	// as a hardened cluster's would.
	Expect(k8sClient.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`)))).To(Succeed())
})

func renderSet(releaseName, ns string, vals map[string]any) []*unstructured.Unstructured {
	GinkgoHelper()
	objs, err := chartrender.Render(releaseName, ns, vals)
	Expect(err).NotTo(HaveOccurred())
	return objs
}

func ciValues(set string) map[string]any {
	GinkgoHelper()
	vals, err := readValuesSet(set)
	Expect(err).NotTo(HaveOccurred())
	return vals
}

// apply server-side applies obj as Helm's field manager would.
func applyObject(ctx context.Context, c client.Client, obj *unstructured.Unstructured, opts ...client.ApplyOption) error {
	opts = append(opts, client.FieldOwner("helm"), client.ForceOwnership)
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), opts...)
}

var _ = Describe("Every rendered object", func() {
	for _, set := range allSets {
		It("is accepted by the API server with values set "+set, func(ctx SpecContext) {
			objs := renderSet(release, namespace, ciValues(set))
			Expect(objs).NotTo(BeEmpty())
			for _, obj := range objs {
				Expect(applyObject(ctx, k8sClient, obj, client.DryRunAll)).To(Succeed(),
					"server-side dry-run apply of %s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
				if obj.GetKind() == "Deployment" {
					// Pod Security admission enforces on pods only; check the
					// operator's pod as the ReplicaSet would create it.
					dep := &appsv1.Deployment{}
					Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, dep)).To(Succeed())
					pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: dep.Name}, Spec: dep.Spec.Template.Spec}
					Expect(k8sClient.Create(ctx, pod, client.DryRunAll)).To(Succeed(), "the operator pod under the restricted Pod Security Standard")
				}
			}
		})
	}
})

// as is a client that acts as a ServiceAccount, authorized by RBAC like the
// pod that runs with it.
func as(namespace, name string) (*rest.Config, client.Client) {
	GinkgoHelper()
	cfg := rest.CopyConfig(restCfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: serviceaccount.MakeUsername(namespace, name),
		Groups:   append(serviceaccount.MakeGroupNames(namespace), "system:authenticated"),
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return cfg, c
}

// installRBAC creates the ServiceAccounts, RBAC objects and admission
// policies of a render for real; nothing else is needed to act as the
// chart's ServiceAccount, bounded as it would be. The warm pods' policy is
// left out (warmPodsPolicy): it binds every namespace, and the suites run
// several releases at once, whose operators it would refuse one another.
func installRBAC(ctx context.Context, objs []*unstructured.Unstructured) {
	GinkgoHelper()
	for _, obj := range objs {
		if obj.GetKind() == "ServiceAccount" || strings.HasPrefix(obj.GetAPIVersion(), "rbac.authorization.k8s.io/") ||
			(strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") && !warmPodsPolicy(obj)) {
			Expect(applyObject(ctx, k8sClient, obj)).To(Succeed(), "%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName())
		}
	}
}

// warmPodsPolicy tells the policy, and its binding, that keeps a warm
// pod's command line the operator's.
func warmPodsPolicy(obj *unstructured.Unstructured) bool {
	return strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") && strings.HasSuffix(obj.GetName(), "-warm-pods")
}

// runOperator runs the real reconciler as the ServiceAccount until the spec
// ends; if RBAC lacked a list or watch, its caches would never sync.
func runOperator(cfg *rest.Config, leaseNamespace string, watch []string) {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "memcached-operator.cache.example.com",
		LeaderElectionNamespace:       leaseNamespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         memcached.CacheOptions(watch),
		// Each spec starts its own manager with the same controller name.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&memcached.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("memcached-operator"),
		Defaults:  policy.Config{DefaultImage: "memcached:1.6"},
	}).SetupWithManager(mgr, 1)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer GinkgoRecover()
		done <- mgr.Start(ctx)
	}()
	DeferCleanup(func() {
		cancel()
		Eventually(done, 30*time.Second).Should(Receive(Not(HaveOccurred())))
	})
}

// reconciledBy requires the operator to have written a Memcached's children
// and status, which it can only do with the verbs it needs.
func reconciledBy(ctx context.Context, ns, name string) {
	GinkgoHelper()
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
	}
	Expect(k8sClient.Create(ctx, mc)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		g.Expect(mc.Status.ObservedGeneration).To(Equal(mc.Generation), "status patched")
		g.Expect(mc.Status.Conditions).NotTo(BeEmpty())
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mc), &appsv1.Deployment{})).To(Succeed())
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mc), &corev1.Service{})).To(Succeed())
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
}

// authReconciledBy waits for the operator to build an auth fleet's
// Deployment, whose pods' auth check waits for the Secret, and to report
// from the fleet's pods that none started yet: it reads no Secret.
func authReconciledBy(ctx context.Context, ns, name string) {
	GinkgoHelper()
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1),
			Auth: &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: name + "-auth"}, ReloaderImage: ptr.To("op:1")}},
	}
	Expect(k8sClient.Create(ctx, mc)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionAuthReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonAuthSecretPending))
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mc), d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", name+"-auth")))
		g.Expect(d.Spec.Template.Spec.InitContainers).To(ContainElement(HaveField("Name", "auth-check")))
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
}

// tlsReconciledBy creates a TLS fleet, waits for the operator to create its
// Certificate, stands in for cert-manager by marking it Ready, and waits for
// the Deployment that mounts its Secret.
func tlsReconciledBy(ctx context.Context, ns, name string) {
	GinkgoHelper()
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1),
			TLS: &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}, ReloaderImage: ptr.To("op:1")}},
	}
	Expect(k8sClient.Create(ctx, mc)).To(Succeed())
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"})
	Eventually(func(g Gomega) {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mc), cert)).To(Succeed())
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mc), mc)).To(Succeed())
		c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionCertificateReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonCertificateNotReady))
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Ready","message":"up to date","observedGeneration":%d,"lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, cert.GetGeneration())
	Expect(k8sClient.Status().Patch(ctx, cert, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(mc), d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", name+"-tls")))
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
}

// allowed is whether c may do verb on resource, asked through
// SelfSubjectAccessReview so that any verb can be checked without side effects.
func allowed(ctx context.Context, c client.Client, attrs authorizationv1.ResourceAttributes) bool {
	GinkgoHelper()
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	Expect(c.Create(ctx, review)).To(Succeed())
	return review.Status.Allowed
}

func attrs(verb, group, resource, ns string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns}
}

// operatorCallsSucceed makes, as the ServiceAccount, the calls the operator
// makes outside reconciling: leader election, events, metrics authn/authz.
func operatorCallsSucceed(ctx context.Context, c client.Client, leaseNS, eventNS string) {
	GinkgoHelper()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: "rbac-check"}}
	Expect(c.Create(ctx, lease)).To(Succeed())
	lease.Spec.HolderIdentity = ptr.To("me")
	Expect(c.Update(ctx, lease)).To(Succeed())

	event := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: eventNS, GenerateName: "rbac-check-"},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: "memcached-operator", ReportingInstance: "rbac-check",
		Action: "Check", Reason: "Check", Type: corev1.EventTypeNormal,
		Regarding: corev1.ObjectReference{Kind: "Memcached", APIVersion: cachev1alpha1.GroupVersion.String(), Namespace: eventNS, Name: "x"},
	}
	Expect(c.Create(ctx, event)).To(Succeed())

	// controller-runtime's metrics filter authenticates and authorizes each scrape.
	Expect(c.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: "not-a-token"}})).To(Succeed())
	Expect(c.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "prometheus", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}})).To(Succeed())
}

func forbidden(err error) bool { return apierrors.IsForbidden(err) }

var _ = Describe("The chart's RBAC", func() {
	It("is enough for the operator watching all namespaces, and no more", func(ctx SpecContext) {
		const rel, ns = "mc-cluster", "mc-cluster-system"
		sa := rel + "-memcached-operator"
		installRBAC(ctx, renderSet(rel, ns, ciValues("default")))
		cfg, c := as(ns, sa)

		runOperator(cfg, ns, nil)
		reconciledBy(ctx, "team-a", "cluster-wide")
		reconciledBy(ctx, "other", "cluster-wide")
		authReconciledBy(ctx, "other", "cluster-auth")
		tlsReconciledBy(ctx, "other", "cluster-tls")
		operatorCallsSucceed(ctx, c, ns, "other")

		By("keeping what the operator never does forbidden")
		Expect(c.Get(ctx, client.ObjectKey{Namespace: "other", Name: "cluster-auth-auth"}, &corev1.Secret{})).To(Satisfy(forbidden),
			"the operator reads no Secret: the pods say whether the auth Secret exists")
		for _, ns := range []string{"other", "kube-system", ""} {
			for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
				Expect(allowed(ctx, c, attrs(verb, "", "secrets", ns))).To(BeFalse(), "secrets "+verb+" in "+ns)
			}
		}
		Expect(allowed(ctx, c, attrs("update", "cert-manager.io", "certificates", "other"))).To(BeFalse(), "Certificates are applied, never updated")
		Expect(allowed(ctx, c, attrs("create", "cert-manager.io", "certificaterequests", "other"))).To(BeFalse(), "issuing is cert-manager's")
		Expect(allowed(ctx, c, attrs("get", "cert-manager.io", "issuers", "other"))).To(BeFalse())
		Expect(allowed(ctx, c, attrs("get", "", "secrets", "other"))).To(BeFalse(), "the certificate's Secret is the kubelet's to read")
		Expect(c.Create(ctx, &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "x"}})).To(Satisfy(forbidden),
			"the operator reads Memcacheds, users write them")
		Expect(c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}})).To(Satisfy(forbidden))
		Expect(allowed(ctx, c, attrs("create", "", "pods", "other"))).To(BeFalse(), "pods are the workloads' to create")
		Expect(allowed(ctx, c, attrs("deletecollection", "", "pods", "other"))).To(BeFalse())
		// The deletes RBAC grants (a warm fleet's pods, which the operator
		// rolls itself) the write policy confines to those pods.
		Expect(allowed(ctx, c, attrs("create", "coordination.k8s.io", "leases", "other"))).To(BeFalse(), "leases only in the lease namespace")
		Expect(allowed(ctx, c, attrs("escalate", "rbac.authorization.k8s.io", "clusterroles", ""))).To(BeFalse())
	})

	It("is enough for the operator in namespace-scoped mode, and confined to its namespaces", func(ctx SpecContext) {
		const rel, ns = "mc-tenant", "mc-tenant-system"
		sa := rel + "-memcached-operator"
		watched := []string{"team-a", "team-b"}
		installRBAC(ctx, renderSet(rel, ns, ciValues("namespace-scoped")))
		cfg, c := as(ns, sa)

		runOperator(cfg, ns, watched)
		for _, w := range watched {
			reconciledBy(ctx, w, "tenant")
		}
		authReconciledBy(ctx, "team-b", "tenant-auth")
		tlsReconciledBy(ctx, "team-b", "tenant-tls")
		operatorCallsSucceed(ctx, c, ns, "team-b")

		By("keeping every other namespace out of reach")
		Expect(c.List(ctx, &cachev1alpha1.MemcachedList{})).To(Satisfy(forbidden), "no cluster-wide list")
		Expect(c.List(ctx, &cachev1alpha1.MemcachedList{}, client.InNamespace("other"))).To(Satisfy(forbidden))
		for _, res := range []struct{ group, resource string }{{"apps", "deployments"}, {"", "services"}, {"policy", "poddisruptionbudgets"}, {"cert-manager.io", "certificates"}} {
			Expect(allowed(ctx, c, attrs("create", res.group, res.resource, "other"))).To(BeFalse(), res.resource)
			Expect(allowed(ctx, c, attrs("create", res.group, res.resource, "team-a"))).To(BeTrue(), res.resource)
		}
		Expect(allowed(ctx, c, attrs("get", "", "secrets", "team-a"))).To(BeFalse())
		Expect(allowed(ctx, c, attrs("list", "", "secrets", "other"))).To(BeFalse(), "not even metadata outside the watched namespaces")
	})

	It("lets the helm test pod do what its check does and nothing else", func(ctx SpecContext) {
		const rel, ns = "mc-test", "mc-cluster-system"
		for _, mode := range []struct {
			set   string
			verbs []string
		}{{"default", []string{"create"}}, {"ha", []string{"create", "get", "list", "watch", "delete"}}} {
			installRBAC(ctx, renderSet(rel, ns, ciValues(mode.set)))
			_, c := as(ns, rel+"-memcached-operator-test")
			for _, verb := range []string{"create", "get", "list", "watch", "delete", "update", "patch"} {
				Expect(allowed(ctx, c, attrs(verb, "cache.example.com", "memcacheds", "default"))).To(Equal(slices.Contains(mode.verbs, verb)),
					"%s: %s memcacheds", mode.set, verb)
			}
			Expect(allowed(ctx, c, attrs("create", "cache.example.com", "memcacheds", "other"))).To(BeFalse())
			Expect(allowed(ctx, c, attrs("create", "apps", "deployments", "default"))).To(BeFalse())
		}
	})
})

// helmConfig is a Helm SDK client of the envtest API server, acting as a
// cluster admin the way `helm` with a kubeconfig does.
func helmConfig(ns string) *action.Configuration {
	GinkgoHelper()
	return helmConfigFor(env, ns)
}

func helmConfigFor(env *envtest.Environment, ns string) *action.Configuration {
	GinkgoHelper()
	user, err := env.AddUser(envtest.User{Name: "helm", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(path, kubeconfig, 0o600)).To(Succeed())
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &path
	flags.Namespace = &ns
	cfg := &action.Configuration{}
	Expect(cfg.Init(flags, ns, "secret", func(format string, v ...any) {
		_, _ = fmt.Fprintf(GinkgoWriter, format+"\n", v...)
	})).To(Succeed())
	return cfg
}

// webhookTrust is what the API server trusts and what the operator serves
// when cert-manager is off.
func webhookTrust(ctx context.Context, ns, fullname string) (caBundles [][]byte, secret map[string][]byte) {
	GinkgoHelper()
	s := &corev1.Secret{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: fullname + "-webhook-tls"}, s)).To(Succeed())
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: fullname}, mwc)).To(Succeed())
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: fullname}, vwc)).To(Succeed())
	caBundles = append(caBundles, mwc.Webhooks[0].ClientConfig.CABundle)
	for _, w := range vwc.Webhooks {
		caBundles = append(caBundles, w.ClientConfig.CABundle)
	}
	return caBundles, s.Data
}

var _ = Describe("helm install with cert-manager", func() {
	It("installs every values set that uses cert-manager when its API is served", func(ctx SpecContext) {
		const rel, ns = "mc-install", "mc-upgrade-system"
		chrt, err := chartrender.Load()
		Expect(err).NotTo(HaveOccurred())
		cfg := helmConfig(ns)
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace = rel, ns
		install.SkipCRDs = true
		_, err = install.RunWithContext(ctx, chrt, ciValues("default"))
		Expect(err).NotTo(HaveOccurred())
		cert := &unstructured.Unstructured{}
		cert.SetAPIVersion("cert-manager.io/v1")
		cert.SetKind("Certificate")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: rel + "-memcached-operator-webhook"}, cert)).To(Succeed())
		_, err = action.NewUninstall(cfg).Run(rel)
		Expect(err).NotTo(HaveOccurred())
	})
})

var _ = Describe("helm install on a cluster without cert-manager", func() {
	It("fails early with the fix unless certManager.enabled=false", func(ctx SpecContext) {
		bare, err := testenv.New(testenv.Options{})
		Expect(err).NotTo(HaveOccurred())
		_, err = bare.Start()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(bare.Stop)
		cfg := helmConfigFor(bare, "default")

		chrt, err := chartrender.Load()
		Expect(err).NotTo(HaveOccurred())
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace = "bare", "default"
		install.SkipCRDs = true
		install.DryRun, install.DryRunOption = true, "server"
		_, err = install.RunWithContext(ctx, chrt, ciValues("default"))
		Expect(err).To(MatchError(ContainSubstring("install cert-manager first, or set certManager.enabled=false")))

		_, err = install.RunWithContext(ctx, chrt, ciValues("no-cert-manager"))
		Expect(err).NotTo(HaveOccurred())
	})
})

var _ = Describe("helm install and upgrade without cert-manager", func() {
	It("keeps the generated CA and serving certificate across upgrades", func(ctx SpecContext) {
		const rel, ns = "mc-upgrade", "mc-upgrade-system"
		fullname := rel + "-memcached-operator"
		chrt, err := chartrender.Load()
		Expect(err).NotTo(HaveOccurred())
		vals := ciValues("no-cert-manager-helm")
		cfg := helmConfig(ns)

		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace = rel, ns
		// envtest installed the CRD already, as `helm install` would the first time.
		install.SkipCRDs = true
		_, err = install.RunWithContext(ctx, chrt, vals)
		Expect(err).NotTo(HaveOccurred())
		bundles, secret := webhookTrust(ctx, ns, fullname)
		for _, b := range bundles {
			Expect(b).To(Equal(secret["ca.crt"]))
		}

		upgrade := action.NewUpgrade(cfg)
		upgrade.Namespace = ns
		// No kubelet runs the CRD upgrade hook's Job here (test/crdupgrade
		// and the e2e lifecycle suite run it); Helm would wait for it.
		upgrade.DisableHooks = true
		_, err = upgrade.RunWithContext(ctx, rel, chrt, vals)
		Expect(err).NotTo(HaveOccurred())
		bundlesAfter, secretAfter := webhookTrust(ctx, ns, fullname)
		Expect(secretAfter).To(Equal(secret), "an upgrade must not replace the serving certificate")
		Expect(bundlesAfter).To(Equal(bundles), "an upgrade must not change the caBundle")

		_, err = action.NewUninstall(cfg).Run(rel)
		Expect(err).NotTo(HaveOccurred())
	})
})
