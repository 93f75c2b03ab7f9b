// Command cainjector is cert-manager's CA injector: it fills the caBundle of
// webhook configurations, APIServices and CRD conversion webhooks from
// Certificates and Secrets, configured by the flags its Helm chart passes.
package main

import (
	"context"
	"github.com/cert-manager/cert-manager/memcached-operator-testbed/internal/cmdutil"
	"os"
	"time"

	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	logsapi "k8s.io/component-base/logs/api/v1"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
)

func main() { cmdutil.Main(run) }

func run(ctx context.Context) error {

	var (
		kubeconfig, namespace, leNamespace, metricsAddr string
		leaderElect                                     bool
		leaseDuration, renewDeadline, retryPeriod       time.Duration
	)
	logging := logsapi.NewLoggingConfiguration()
	fs := pflag.NewFlagSet("cainjector", pflag.ContinueOnError)
	// The chart may pass flags this build does not implement (profiling,
	// feature gates): they are accepted and ignored.
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (in-cluster config when empty)")
	fs.StringVar(&namespace, "namespace", "", "only inject into resources in this namespace (all when empty)")
	fs.BoolVar(&leaderElect, "leader-elect", true, "use leader election")
	fs.StringVar(&leNamespace, "leader-election-namespace", "kube-system", "namespace of the leader election lease")
	fs.DurationVar(&leaseDuration, "leader-election-lease-duration", 60*time.Second, "lease duration")
	fs.DurationVar(&renewDeadline, "leader-election-renew-deadline", 40*time.Second, "renew deadline")
	fs.DurationVar(&retryPeriod, "leader-election-retry-period", 15*time.Second, "retry period")
	fs.StringVar(&metricsAddr, "metrics-listen-address", "0", "metrics address ('0' disables)")
	if err := cmdutil.ParseFlags(fs, logging); err != nil {
		return err
	}
	ctrl.SetLogger(logf.Log)

	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(admissionv1.AddToScheme(scheme))
	utilruntime.Must(apiregv1.AddToScheme(scheme))
	utilruntime.Must(apiextv1.AddToScheme(scheme))

	if kubeconfig != "" {
		if err := os.Setenv("KUBECONFIG", kubeconfig); err != nil {
			return err
		}
	}
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	// Without a user agent every server-side apply fails: fieldManager is derived from it.
	restCfg = util.RestConfigWithUserAgent(restCfg, "cainjector")

	cacheOpts := cache.Options{}
	if namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		LeaderElection:                leaderElect,
		LeaderElectionNamespace:       leNamespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
	})
	if err != nil {
		return err
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
