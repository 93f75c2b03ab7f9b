package memcached_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/memcached"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/internal/restmapping"
	"github.com/example/memcached-operator/test/testenv"
)

// The envtest tier: a real etcd and kube-apiserver, no kube-controller-manager.
// Nothing runs pods, updates Deployment status or writes EndpointSlices here,
// so specs stand in for those controllers; garbage collection is left to the
// real cluster.

var (
	ctx        context.Context
	cancel     context.CancelFunc
	env        *envtest.Environment
	cfg        *rest.Config
	scheme     = runtime.NewScheme()
	k8s        client.Client // uncached: assertions never read the manager's cache
	mgr        ctrl.Manager
	testCfg    = policy.Config{DefaultImage: "memcached:envtest", ExporterImage: "memcached-operator:envtest"}
	testLimits = policy.Limits{MaxSize: 8}
	// metricsReg holds the operator's metrics, as the manager's registry does.
	metricsReg = prometheus.NewRegistry()
)

func TestController(t *testing.T) {
	RegisterFailHandler(Fail)
	testenv.RunSpecs(t, "Memcached controller (envtest)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// Generous: the machine may be compiling Kubernetes on both cores meanwhile.
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	SetDefaultConsistentlyDuration(2 * time.Second)
	ctx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())

	var err error
	// cert-manager's CRDs: TLS fleets own a Certificate. Its API missing is
	// the status table's (status.Compute) to test.
	env, err = testenv.New(testenv.Options{CertManagerCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	mgr, err = ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  memcached.CacheOptions(nil),
		// The operator's mapper, so the suite runs through its memo.
		MapperProvider: restmapping.Provider(apiutil.NewDynamicRESTMapper),
	})
	Expect(err).NotTo(HaveOccurred())
	r := &memcached.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("memcached-operator"),
		Defaults:  testCfg,
		Limits:    testLimits,
		Recheck:   time.Second,
	}
	Expect(r.SetupWithManager(mgr, 2)).To(Succeed())
	Expect(memcached.RegisterMetrics(metricsReg, mgr.GetCache(), mgr.Elected())).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	cancel()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
