package webhooks_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/test/chartrender"
	"github.com/example/memcached-operator/test/testenv"
	"github.com/example/memcached-operator/webhooks"
)

// The webhooks run in a real manager's webhook server and are called by a
// real kube-apiserver over TLS, through the webhook configurations the chart
// renders, so the paths, rules and scopes users install are the ones tested.

const (
	maxSize       = 10
	defaultImage  = "memcached:webhook-test"
	exporterImage = "memcached-operator:webhook-test"
)

var (
	ctx      context.Context
	cancel   context.CancelFunc
	env      *envtest.Environment
	scheme   = runtime.NewScheme()
	k8s      client.Client
	warnings = &warningRecorder{}
)

func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	testenv.RunSpecs(t, "Memcached webhooks (envtest, real TLS admission)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	ctx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())

	mutating, validating := chartWebhooks()
	var err error
	// cert-manager's CRDs: the admission property dry-runs TLS fleets'
	// Certificates against their schema.
	env, err = testenv.New(testenv.Options{CertManagerCRDs: true, Webhooks: &envtest.WebhookInstallOptions{
		MutatingWebhooks:   mutating,
		ValidatingWebhooks: validating,
	}})
	Expect(err).NotTo(HaveOccurred())
	cfg, err := env.Start()
	Expect(err).NotTo(HaveOccurred())

	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = warnings
	k8s, err = client.New(wcfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	wio := &env.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
		}),
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(webhooks.SetupWithManager(mgr, webhooks.Options{
		Defaults: policy.Config{DefaultImage: defaultImage, ExporterImage: exporterImage},
		Limits:   policy.Limits{MaxSize: maxSize},
	})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }).Should(Succeed())
})

var _ = AfterSuite(func() {
	cancel()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// chartWebhooks takes the webhook configurations from the chart's default render.
func chartWebhooks() ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration) {
	objs, err := chartrender.Render("memcached-operator", "memcached-operator-system", nil)
	Expect(err).NotTo(HaveOccurred())
	var m []*admissionregistrationv1.MutatingWebhookConfiguration
	var v []*admissionregistrationv1.ValidatingWebhookConfiguration
	for _, o := range objs {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			typed := &admissionregistrationv1.MutatingWebhookConfiguration{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed)).To(Succeed())
			m = append(m, typed)
		case "ValidatingWebhookConfiguration":
			typed := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed)).To(Succeed())
			v = append(v, typed)
		}
	}
	Expect(m).To(HaveLen(1), "the chart renders one MutatingWebhookConfiguration")
	Expect(v).To(HaveLen(1), "the chart renders one ValidatingWebhookConfiguration")
	return m, v
}

// warningRecorder keeps the admission warnings the API server passes on.
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, msg)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}
