package chart_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/internal/webhookcert"
	"github.com/example/memcached-operator/test/chartrender"
	"github.com/example/memcached-operator/test/manifests"
	"github.com/example/memcached-operator/webhooks"
)

// Issue 13, GitOps renders: with cert-manager off, the chart is applied the
// way Argo CD and Flux apply `helm template` output (server-side, their own
// field manager, force-conflicts), and two replicas of the operator keep the
// webhook certificate. The API server calls the webhooks over real TLS.

const gitopsRelease, gitopsNS = "mc-gitops", "mc-gitops-system"

// certReplica is one operator replica: the webhooks and the certificate
// rotator, acting as the chart's ServiceAccount.
type certReplica struct {
	rotator *webhookcert.Rotator
	port    int
	writes  *atomic.Int64
	verbs   *verbRecorder
	stop    func()
}

func freePort() int {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// startReplica runs a replica as the operator does with
// --webhook-cert-management=operator: the rotator without leader election,
// the webhook server serving the rotator's certificate.
func startReplica(cfg *rest.Config, opts webhookcert.Options) *certReplica {
	GinkgoHelper()
	cfg = rest.CopyConfig(cfg)
	r := &certReplica{port: freePort(), writes: &atomic.Int64{}, verbs: &verbRecorder{seen: sets.New[string]()}}
	cfg.Wrap(r.verbs.wrap)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet {
				r.writes.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	var err error
	r.rotator, err = webhookcert.New(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: r.port,
			TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = r.rotator.GetCertificate }}}),
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(webhooks.SetupWithManager(mgr, webhooks.Options{
		Defaults: policy.Config{DefaultImage: "memcached:from-webhook"},
		Limits:   policy.Limits{MaxSize: 10},
	})).To(Succeed())
	Expect(mgr.Add(r.rotator)).To(Succeed())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer GinkgoRecover()
		done <- mgr.Start(ctx)
	}()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			Eventually(done, 30*time.Second).Should(Receive(Not(HaveOccurred())))
		})
	}
	return r
}

func (r *certReplica) ready() error {
	return r.rotator.ReadyCheck(httptest.NewRequest(http.MethodGet, "/readyz", nil))
}

// rotatorOptions reads the rotator's settings from the rendered
// Deployment's arguments, so the test runs what the chart configures; the
// test's webhook servers are reached as localhost, which is added.
func rotatorOptions(objs []*unstructured.Unstructured) webhookcert.Options {
	GinkgoHelper()
	args := map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			dep := &appsv1.Deployment{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, dep)).To(Succeed())
			for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
				k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				args[k] = v
			}
		}
	}
	Expect(args).To(HaveKeyWithValue("webhook-cert-management", "operator"))
	caValidity, err := time.ParseDuration(args["webhook-cert-ca-validity"])
	Expect(err).NotTo(HaveOccurred())
	validity, err := time.ParseDuration(args["webhook-cert-validity"])
	Expect(err).NotTo(HaveOccurred())
	return webhookcert.Options{
		Namespace: args["webhook-cert-namespace"], SecretName: args["webhook-cert-secret"],
		MutatingWebhookConfiguration: args["webhook-cert-mutating-configuration"], ValidatingWebhookConfiguration: args["webhook-cert-validating-configuration"],
		CAName: "test-ca",
		Policy: webhookcert.Policy{
			DNSNames:   append(strings.Split(args["webhook-cert-dns-names"], ","), "localhost"),
			CAValidity: caValidity, ServingValidity: validity, RenewFraction: 1.0 / 3,
		},
	}
}

// local points the rendered webhooks at the test's servers, standing in for
// the Service and kube-proxy envtest lacks: the mutating webhook at one
// replica, the validating ones at the other, so admission needs both.
func local(objs []*unstructured.Unstructured, mutatingPort, validatingPort int) []*unstructured.Unstructured {
	GinkgoHelper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		o = o.DeepCopy()
		port := map[string]int{"MutatingWebhookConfiguration": mutatingPort, "ValidatingWebhookConfiguration": validatingPort}[o.GetKind()]
		if port != 0 {
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			for i, h := range hooks {
				hm := h.(map[string]any)
				path, _, _ := unstructured.NestedString(hm, "clientConfig", "service", "path")
				Expect(unstructured.SetNestedField(hm, map[string]any{"url": fmt.Sprintf("https://localhost:%d%s", port, path)}, "clientConfig")).To(Succeed())
				hooks[i] = hm
			}
			Expect(unstructured.SetNestedSlice(o.Object, hooks, "webhooks")).To(Succeed())
		}
		out = append(out, o)
	}
	return out
}

// applyAll applies a render server-side as fieldManager, forcing conflicts,
// the way `kubectl apply --server-side --force-conflicts` and GitOps
// controllers do; all but the warm pods' policy (see installRBAC).
func applyAll(ctx context.Context, objs []*unstructured.Unstructured, fieldManager string) {
	GinkgoHelper()
	for _, o := range objs {
		if warmPodsPolicy(o) {
			continue
		}
		Expect(k8sClient.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner(fieldManager), client.ForceOwnership)).
			To(Succeed(), "%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}

// trust is what the API server trusts (every webhook's caBundle) and what the
// Secret holds.
func trust(ctx context.Context, opts webhookcert.Options) (bundles [][]byte, secret *corev1.Secret) {
	GinkgoHelper()
	secret = &corev1.Secret{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: opts.Namespace, Name: opts.SecretName}, secret)).To(Succeed())
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: opts.MutatingWebhookConfiguration}, m)).To(Succeed())
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: opts.ValidatingWebhookConfiguration}, v)).To(Succeed())
	for _, w := range m.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	for _, w := range v.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return bundles, secret
}

// admissionLoop sends dry-run creates through both webhooks until stopped,
// counting what the API server admitted, what failed in a webhook call (or
// came back without the mutating webhook's default), and what the API server
// refused for a reason of its own.
type admissionLoop struct {
	ok, failed, other atomic.Int64
	mu                sync.Mutex
	errs, otherErrs   []string
	cancel            func()
	done              chan struct{}
}

// webhookFailure tells an admission the webhooks failed from one the API
// server refused on its own: every error of a webhook call (TLS, timeout,
// refused connection, a denial) is reported as "failed calling webhook" or
// "admission webhook ... denied", while an overloaded API server can also
// fail its own policies (a ValidatingAdmissionPolicy that cannot read its
// parameter in time), which no certificate of ours causes.
func webhookFailure(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "admission webhook")
}

func startAdmissions(ns string) *admissionLoop {
	l := &admissionLoop{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() {
		defer GinkgoRecover()
		defer close(l.done)
		for i := 0; ctx.Err() == nil; i++ {
			mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("loop-%d", i)},
				Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
			err := k8sClient.Create(ctx, mc, client.DryRunAll)
			switch {
			case ctx.Err() != nil:
			case err == nil && ptr.Deref(mc.Spec.Image, "") == "memcached:from-webhook":
				l.ok.Add(1)
			case err != nil && !webhookFailure(err):
				l.other.Add(1)
				l.mu.Lock()
				l.otherErrs = append(l.otherErrs, err.Error())
				l.mu.Unlock()
			default:
				l.failed.Add(1)
				l.mu.Lock()
				l.errs = append(l.errs, fmt.Sprint(err, " image=", ptr.Deref(mc.Spec.Image, "")))
				l.mu.Unlock()
			}
		}
	}()
	return l
}

// settle waits for n more admissions, so that what happened before has been
// seen by admission requests too.
func (l *admissionLoop) settle(n int64) {
	GinkgoHelper()
	target := l.ok.Load() + l.failed.Load() + n
	Eventually(func() int64 { return l.ok.Load() + l.failed.Load() }).WithTimeout(60 * time.Second).Should(BeNumerically(">=", target))
}

func (l *admissionLoop) stopAndExpectNoFailure() {
	GinkgoHelper()
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	GinkgoWriter.Printf("admissions: %d admitted, %d failed in the webhooks, %d refused by the API server itself %v\n",
		l.ok.Load(), l.failed.Load(), l.other.Load(), l.otherErrs[:min(len(l.otherErrs), 3)])
	Expect(l.failed.Load()).To(BeZero(), "failed admissions: %v", l.errs[:min(len(l.errs), 5)])
	Expect(l.ok.Load()).To(BeNumerically(">", 10*l.other.Load()), "the API server refused too many for the loop to test the webhooks")
}

func servedCA(r *certReplica) string {
	c, err := r.rotator.GetCertificate(nil)
	if err != nil {
		return ""
	}
	return c.Leaf.Issuer.String() + "/" + string(c.Leaf.AuthorityKeyId)
}

func servedSerial(r *certReplica) string {
	c, err := r.rotator.GetCertificate(nil)
	if err != nil {
		return ""
	}
	return c.Leaf.SerialNumber.String()
}

var _ = Describe("The operator keeping its webhook certificate (certManager.enabled=false)", Ordered, func() {
	var (
		objs       []*unstructured.Unstructured
		opts       webhookcert.Options
		a, b       *certReplica
		appNS      string
		saCfg      *rest.Config
		saClient   client.Client
		localPorts [2]int
	)

	BeforeAll(func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gitopsNS}})).To(Succeed())
		appNS = "gitops-apps"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}})).To(Succeed())
		rel, err := chartrender.Release(gitopsRelease, gitopsNS, ciValues("no-cert-manager"))
		Expect(err).NotTo(HaveOccurred())
		objs, err = manifests.Decode(rel.Manifest)
		Expect(err).NotTo(HaveOccurred())
		opts = rotatorOptions(objs)
		saCfg, saClient = as(gitopsNS, gitopsRelease+"-memcached-operator")
		// The webhooks judge every Memcached; leave none behind for other specs.
		DeferCleanup(func(ctx context.Context) {
			Expect(k8sClient.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: opts.MutatingWebhookConfiguration}})).To(Succeed())
			Expect(k8sClient.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: opts.ValidatingWebhookConfiguration}})).To(Succeed())
		})
		// Two replicas, as with the chart's HA values; the last spec
		// replaces them.
		a = startReplica(saCfg, opts)
		b = startReplica(saCfg, opts)
		DeferCleanup(func() { a.stop(); b.stop() })
		localPorts = [2]int{a.port, b.port}
	})

	It("fills the empty Secret, publishes the CA, and admits through both webhooks only once ready", func(ctx SpecContext) {
		Expect(a.ready()).To(HaveOccurred(), "not ready before the chart is applied")
		applyAll(ctx, local(objs, a.port, b.port), "helm")

		Eventually(func(g Gomega) {
			g.Expect(a.ready()).To(Succeed())
			g.Expect(b.ready()).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// Both replicas may have minted a CA; only the one whose Secret
		// write won is published.
		Eventually(func(g Gomega) {
			bundles, secret := trust(ctx, opts)
			g.Expect(secret.Data).To(HaveKey(webhookcert.CAKeyKey))
			g.Expect(secret.Data).To(HaveKey(webhookcert.TLSKeyKey))
			for _, bundle := range bundles {
				g.Expect(bundle).To(Equal(secret.Data[webhookcert.CACertKey]), "both configurations, every webhook")
			}
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(servedSerial(a)).To(Equal(servedSerial(b)), "both replicas serve the one certificate in the Secret")

		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "admitted"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)}}
		Expect(k8sClient.Create(ctx, mc)).To(Succeed())
		Expect(mc.Spec.Image).To(HaveValue(Equal("memcached:from-webhook")), "defaulted by the mutating webhook")
		tooBig := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: appNS, Name: "rejected"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](11)}}
		Expect(k8sClient.Create(ctx, tooBig)).To(MatchError(ContainSubstring("spec.size")), "refused by the validating webhook")
	})

	It("changes nothing when two `helm template` renders are applied in a row by a GitOps controller", func(ctx SpecContext) {
		bundlesBefore, secretBefore := trust(ctx, opts)
		loop := startAdmissions(appNS)
		loop.settle(20)
		for range 2 {
			again, err := chartrender.Render(gitopsRelease, gitopsNS, ciValues("no-cert-manager"))
			Expect(err).NotTo(HaveOccurred())
			applyAll(ctx, local(again, localPorts[0], localPorts[1]), "argocd-controller")
		}
		loop.settle(50)
		loop.stopAndExpectNoFailure()
		bundlesAfter, secretAfter := trust(ctx, opts)
		Expect(secretAfter.Data).To(Equal(secretBefore.Data))
		Expect(bundlesAfter).To(Equal(bundlesBefore))
	})

	It("puts back a caBundle something strips, woken by the configuration's watch (the resync is an hour)", func(ctx SpecContext) {
		_, secret := trust(ctx, opts)
		m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: opts.MutatingWebhookConfiguration}}
		Expect(k8sClient.Patch(ctx, m, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/webhooks/0/clientConfig/caBundle"}]`)))).To(Succeed())
		Expect(m.Webhooks[0].ClientConfig.CABundle).To(BeEmpty())
		Eventually(func(g Gomega) {
			bundles, _ := trust(ctx, opts)
			g.Expect(bundles[0]).To(Equal(secret.Data[webhookcert.CACertKey]))
		}).WithTimeout(10 * time.Second).Should(Succeed())
	})

	It("writes nothing in a pass when everything already matches", func(ctx SpecContext) {
		_, secretBefore := trust(ctx, opts)
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: opts.MutatingWebhookConfiguration}, m)).To(Succeed())
		writesA, writesB := a.writes.Load(), b.writes.Load()
		for range 3 {
			_, err := a.rotator.Sync(ctx)
			Expect(err).NotTo(HaveOccurred())
			_, err = b.rotator.Sync(ctx)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(a.writes.Load()).To(Equal(writesA))
		Expect(b.writes.Load()).To(Equal(writesB))
		_, secretAfter := trust(ctx, opts)
		Expect(secretAfter.ResourceVersion).To(Equal(secretBefore.ResourceVersion))
		mAfter := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: opts.MutatingWebhookConfiguration}, mAfter)).To(Succeed())
		Expect(mAfter.ResourceVersion).To(Equal(m.ResourceVersion))
	})

	It("keeps admitting while a Secret edited to garbage is regenerated with a new CA", func(ctx SpecContext) {
		caBefore := servedCA(a)
		loop := startAdmissions(appNS)
		loop.settle(20)
		_, secret := trust(ctx, opts)
		secret.Data[webhookcert.CAKeyKey] = []byte("garbage")
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(servedCA(a)).NotTo(Equal(caBefore))
			g.Expect(servedCA(b)).NotTo(Equal(caBefore))
			g.Expect(a.ready()).To(Succeed())
			g.Expect(b.ready()).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())
		loop.settle(50)
		loop.stopAndExpectNoFailure()
		bundles, _ := trust(ctx, opts)
		Expect(webhookcert.ParseBundle(bundles[0])).To(HaveLen(2), "the old CA stays trusted next to the new one")
	})

	It("creates its Secret again after a kubectl delete, keeps admitting, and a new replica starts from it", func(ctx SpecContext) {
		loop := startAdmissions(appNS)
		loop.settle(20)
		_, secret := trust(ctx, opts)
		Expect(k8sClient.Delete(ctx, secret)).To(Succeed())
		Eventually(func(g Gomega) {
			again := &corev1.Secret{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(secret), again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(secret.UID), "a new Secret, created by the operator")
			g.Expect(again.Data).To(HaveKey(webhookcert.TLSKeyKey))
			g.Expect(a.ready()).To(Succeed())
			g.Expect(b.ready()).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())
		loop.settle(50)
		loop.stopAndExpectNoFailure()
		c := startReplica(saCfg, opts)
		DeferCleanup(c.stop)
		Eventually(c.ready).WithTimeout(30*time.Second).Should(Succeed(), "a replica started after the delete serves from the new Secret")
	})

	It("needs exactly the verbs the chart grants its ServiceAccount, on the named objects only", func(ctx SpecContext) {
		granted := sets.New[string]()
		for _, o := range objs {
			if o.GetName() != gitopsRelease+"-memcached-operator-webhook-certs" || (o.GetKind() != "Role" && o.GetKind() != "ClusterRole") {
				continue
			}
			role := &rbacv1.ClusterRole{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, role)).To(Succeed())
			for _, r := range role.Rules {
				for _, res := range r.Resources {
					for _, verb := range r.Verbs {
						granted.Insert(ruleKey(r.APIGroups[0], res, "", verb))
					}
				}
			}
		}
		seen := a.verbs.verbs().Union(b.verbs.verbs())
		Expect(sets.List(seen)).To(Equal(sets.List(granted)), "every granted verb used, none missing")

		Expect(saClient.Get(ctx, client.ObjectKey{Namespace: gitopsNS, Name: gitopsRelease + "-memcached-operator-metrics-scraper-token"}, &corev1.Secret{})).
			To(Satisfy(forbidden), "no other Secret")
		Expect(saClient.Get(ctx, client.ObjectKey{Name: "other"}, &admissionregistrationv1.ValidatingWebhookConfiguration{})).To(Satisfy(forbidden), "no other configuration")
		for _, p := range []string{`[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`, `[{"op":"replace","path":"/webhooks/0/rules/0/resources","value":["nothing"]}]`} {
			Expect(saClient.Patch(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: opts.ValidatingWebhookConfiguration}},
				client.RawPatch(types.JSONPatchType, []byte(p)))).To(deniedBy("changes nothing of its webhook configurations"), "of its own, the caBundles only: %s", p)
		}
		// RBAC cannot bound a create by name; the write policy does.
		Expect(saClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gitopsNS, Name: "another"}})).To(deniedBy("one Secret"))
		Expect(saClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gitopsNS, Name: opts.SecretName,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: gitopsRelease + "-memcached-operator-metrics-scraper"}},
			Type: corev1.SecretTypeServiceAccountToken})).To(deniedBy("of type Opaque"), "a token Secret under the readable name")
		other := attrs("update", "", "secrets", gitopsNS)
		other.Name = gitopsRelease + "-memcached-operator-metrics-scraper-token"
		Expect(allowed(ctx, saClient, other)).To(BeFalse())
		other = attrs("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "")
		other.Name = "other"
		Expect(allowed(ctx, saClient, other)).To(BeFalse())
	})

	It("renews the serving certificate and the CA as they fall due, with no failed admission", func(ctx SpecContext) {
		a.stop()
		b.stop()
		short := opts
		// The CA is renewed after about 40 s, each serving certificate after
		// about 13 s.
		short.Policy.CAValidity, short.Policy.ServingValidity = 60*time.Second, 20*time.Second
		a = startReplica(saCfg, short)
		b = startReplica(saCfg, short)
		DeferCleanup(func() { a.stop(); b.stop() })
		applyAll(ctx, local(objs, a.port, b.port), "argocd-controller")
		// A new CA under the short validity (the stored one was made for years).
		_, secret := trust(ctx, opts)
		secret.Data = nil
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		shortLived := func(r *certReplica) bool {
			c, err := r.rotator.GetCertificate(nil)
			return err == nil && time.Until(c.Leaf.NotAfter) < time.Minute
		}
		Eventually(func(g Gomega) {
			g.Expect(shortLived(a) && shortLived(b)).To(BeTrue(), "both serve from the short-lived CA")
			g.Expect(a.ready()).To(Succeed())
			g.Expect(b.ready()).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())

		loop := startAdmissions(appNS)
		ca, serial := servedCA(a), servedSerial(a)
		serials := sets.New(serial)
		Eventually(func(g Gomega) {
			serials.Insert(servedSerial(a), servedSerial(b))
			g.Expect(serials.Len()).To(BeNumerically(">=", 3), "serving certificates renewed")
			g.Expect(servedCA(a)).NotTo(Equal(ca), "CA renewed")
			g.Expect(servedCA(b)).NotTo(Equal(ca), "CA renewed")
		}).WithTimeout(90 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		loop.settle(50)
		loop.stopAndExpectNoFailure()
		bundles, _ := trust(ctx, opts)
		Expect(len(webhookcert.ParseBundle(bundles[0]))).To(BeNumerically("<=", webhookcert.MaxBundleCAs))
	})
})

var _ = Describe("Readiness with a certificate from files (cert-manager)", func() {
	It("waits until both webhook configurations trust the mounted tls.crt, reading them as the chart's ServiceAccount", func(ctx SpecContext) {
		const rel, ns = "mc-ready", "mc-cluster-system"
		name := rel + "-memcached-operator"
		installRBAC(ctx, renderSet(rel, ns, ciValues("default")))
		_, c := as(ns, name)

		data, err := webhookcert.Renew(nil, webhookcert.Decision{Action: webhookcert.RenewAll}, time.Now(),
			webhookcert.Policy{DNSNames: []string{"x"}, CAValidity: time.Hour, ServingValidity: time.Hour, RenewFraction: 1.0 / 3}, "ca")
		Expect(err).NotTo(HaveOccurred())
		dir := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), data[webhookcert.TLSCertKey], 0o600)).To(Succeed())
		check := webhookcert.FileReadyCheck(c, c, dir, name, name)
		probe := func() error { return check(httptest.NewRequest(http.MethodGet, "/readyz", nil)) }

		Expect(probe()).To(HaveOccurred(), "no configurations yet")
		// A rule that matches nothing real: these webhooks are never called.
		rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"example.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"things"}}}}
		hookCfg := admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://x.invalid/")}
		none := admissionregistrationv1.SideEffectClassNone
		m := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.example.invalid", ClientConfig: hookCfg, Rules: rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.example.invalid", ClientConfig: hookCfg, Rules: rules, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}}
		Expect(k8sClient.Create(ctx, m)).To(Succeed())
		Expect(k8sClient.Create(ctx, v)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(k8sClient.Delete(ctx, m)).To(Succeed())
			Expect(k8sClient.Delete(ctx, v)).To(Succeed())
		})
		Expect(probe()).To(MatchError(ContainSubstring("does not trust")), "before cainjector injects the CA")

		m.Webhooks[0].ClientConfig.CABundle = data[webhookcert.CACertKey]
		Expect(k8sClient.Update(ctx, m)).To(Succeed())
		Expect(probe()).To(MatchError(ContainSubstring("v.example.invalid does not trust")), "one configuration is not enough")
		v.Webhooks[0].ClientConfig.CABundle = data[webhookcert.CACertKey]
		Expect(k8sClient.Update(ctx, v)).To(Succeed())
		Expect(probe()).To(Succeed())

		// Marked seen, by the chart's ServiceAccount, once.
		marked := func() []string {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(v), v)).To(Succeed())
			Expect(m.Annotations).To(HaveKeyWithValue(webhookcert.BundleSeenAnnotation, webhookcert.BundleDigest(m)))
			Expect(v.Annotations).To(HaveKeyWithValue(webhookcert.BundleSeenAnnotation, webhookcert.BundleDigest(v)))
			return []string{m.ResourceVersion, v.ResourceVersion}
		}
		versions := marked()
		Expect(probe()).To(Succeed())
		Expect(marked()).To(Equal(versions), "a marked caBundle costs no write")
		other := attrs("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "")
		other.Name = "other"
		Expect(allowed(ctx, c, other)).To(BeFalse(), "no other configuration")
	})
})

// TestWebhookFailure: the admission loop counts against the certificate's
// renewal every error of a webhook call, and none of the API server's own
// refusals (these, from a run on a saturated machine).
func TestWebhookFailure(t *testing.T) {
	for msg, want := range map[string]bool{
		`Internal error occurred: failed calling webhook "vmemcached.kb.io": failed to call webhook: Post "https://127.0.0.1:9443/validate": tls: failed to verify certificate: x509: certificate signed by unknown authority`:                                                                                                     true,
		`Internal error occurred: failed calling webhook "mmemcached.kb.io": failed to call webhook: Post "https://127.0.0.1:9443/mutate": context deadline exceeded`:                                                                                                                                                              true,
		`admission webhook "vmemcached.kb.io" denied the request: spec.size: Invalid value`:                                                                                                                                                                                                                                        true,
		`memcacheds.cache.example.com "loop-414" is forbidden: ValidatingAdmissionPolicy 'mc-verbs-memcached-operator-limits' with binding 'mc-verbs-memcached-operator-limits' denied request: failed to configure binding: unexpected error when reading response body. Please retry. Original error: context deadline exceeded`: false,
	} {
		if got := webhookFailure(errors.New(msg)); got != want {
			t.Errorf("webhookFailure(%q) = %v, want %v", msg, got, want)
		}
	}
}
