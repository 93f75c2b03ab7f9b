// Command controller is cert-manager's controller manager with the CA and
// self-signed issuers, all the testbed uses (not ACME, whose DNS providers'
// cloud SDKs were most of the build, nor Vault or Venafi), configured by the
// flags its Helm chart passes. Defaults are cert-manager's own (its defaults package
// links the Venafi issuer, so they are restated here).
package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/cert-manager/cert-manager/memcached-operator-testbed/internal/cmdutil"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/cert-manager/cert-manager/pkg/controller"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"

	// Controllers register themselves in init(): cert-manager's default set
	// without ACME, Vault and Venafi.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/ingresses"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/metrics"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// Issuer implementations, looked up by the issuers controllers.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

type flags struct {
	kubeconfig, apiServerHost, namespace, clusterResourceNamespace string
	leaderElect                                                    bool
	leNamespace                                                    string
	leaseDuration, renewDeadline, retryPeriod                      time.Duration
	controllers                                                    []string
	solverImage                                                    string
	defaultIssuerName, defaultIssuerKind, defaultIssuerGroup       string
	enableOwnerRef, recursiveOnly                                  bool
	recursiveNameservers                                           []string
	maxConcurrentChallenges, workers                               int
	metricsAddr, healthzAddr                                       string
}

func main() { cmdutil.Main(run) }

func run(ctx context.Context) error {
	// Failing to start the controllers as leader ends the process.
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	var f flags
	logging := logsapi.NewLoggingConfiguration()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	// Flags of features this build leaves out are accepted and ignored.
	fs.ParseErrorsAllowlist.UnknownFlags = true
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (in-cluster config when empty)")
	fs.StringVar(&f.apiServerHost, "master", "", "apiserver address (overrides the kubeconfig)")
	fs.StringVar(&f.namespace, "namespace", "", "only watch this namespace (all when empty)")
	fs.StringVar(&f.clusterResourceNamespace, "cluster-resource-namespace", "kube-system", "namespace of ClusterIssuer secrets")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "use leader election")
	fs.StringVar(&f.leNamespace, "leader-election-namespace", "kube-system", "namespace of the leader election lease")
	fs.DurationVar(&f.leaseDuration, "leader-election-lease-duration", 60*time.Second, "lease duration")
	fs.DurationVar(&f.renewDeadline, "leader-election-renew-deadline", 40*time.Second, "renew deadline")
	fs.DurationVar(&f.retryPeriod, "leader-election-retry-period", 15*time.Second, "retry period")
	fs.StringSliceVar(&f.controllers, "controllers", []string{"*"}, "controllers to run: '*' for all, 'name' to add, '-name' to remove")
	fs.StringVar(&f.solverImage, "acme-http01-solver-image", "quay.io/jetstack/cert-manager-acmesolver", "image of the ACME HTTP-01 solver pod")
	fs.StringVar(&f.defaultIssuerName, "default-issuer-name", "", "ingress-shim default issuer name")
	fs.StringVar(&f.defaultIssuerKind, "default-issuer-kind", "Issuer", "ingress-shim default issuer kind")
	fs.StringVar(&f.defaultIssuerGroup, "default-issuer-group", "cert-manager.io", "ingress-shim default issuer group")
	fs.BoolVar(&f.enableOwnerRef, "enable-certificate-owner-ref", false, "owner-reference Secrets to their Certificate")
	fs.BoolVar(&f.recursiveOnly, "dns01-recursive-nameservers-only", false, "only use the recursive nameservers for DNS-01 checks")
	fs.StringSliceVar(&f.recursiveNameservers, "dns01-recursive-nameservers", nil, "nameservers for DNS-01 checks")
	fs.IntVar(&f.maxConcurrentChallenges, "max-concurrent-challenges", 60, "ACME challenges processed at once")
	fs.IntVar(&f.workers, "concurrent-workers", 5, "workers per controller")
	fs.StringVar(&f.metricsAddr, "metrics-listen-address", "0.0.0.0:9402", "metrics address ('0' disables)")
	fs.StringVar(&f.healthzAddr, "internal-healthz-listen-address", "0.0.0.0:9403", "address of /livez and /healthz")
	if err := cmdutil.ParseFlags(fs, logging); err != nil {
		return err
	}
	log := logf.Log.WithName("controller")
	ctx = logf.NewContext(ctx, log)

	nameservers := f.recursiveNameservers
	if len(nameservers) == 0 {
		nameservers = dnsutil.RecursiveNameservers
	}
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         f.kubeconfig,
		APIServerHost:      f.apiServerHost,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		Namespace:          f.namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        f.clusterResourceNamespace,
			ClusterIssuerAmbientCredentials: true,
		},
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverImage:                 f.solverImage,
			HTTP01SolverResourceRequestCPU:    resource.MustParse("10m"),
			HTTP01SolverResourceRequestMemory: resource.MustParse("64Mi"),
			HTTP01SolverResourceLimitsCPU:     resource.MustParse("100m"),
			HTTP01SolverResourceLimitsMemory:  resource.MustParse("64Mi"),
			ACMEHTTP01SolverRunAsNonRoot:      true,
			DNS01CheckAuthoritative:           !f.recursiveOnly,
			DNS01Nameservers:                  nameservers,
			DNS01CheckRetryPeriod:             10 * time.Second,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerName:                 f.defaultIssuerName,
			DefaultIssuerKind:                 f.defaultIssuerKind,
			DefaultIssuerGroup:                f.defaultIssuerGroup,
			DefaultAutoCertificateAnnotations: []string{"kubernetes.io/tls-acme"},
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           f.enableOwnerRef,
			CopiedAnnotationPrefixes:                 []string{"*", "-kubectl.kubernetes.io/", "-fluxcd.io/", "-argocd.argoproj.io/"},
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: f.maxConcurrentChallenges},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	healthz := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	if err := serveHealthz(ctx, g, f.healthzAddr, healthz); err != nil {
		return err
	}
	if f.metricsAddr != "0" && f.metricsAddr != "" {
		ln, err := net.Listen("tcp", f.metricsAddr)
		if err != nil {
			return err
		}
		srv := base.Metrics.NewServer(ln)
		g.Go(func() error { <-ctx.Done(); return srv.Close() })
		g.Go(func() error {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}

	enabled := enabledControllers(f.controllers)
	log.Info("enabled controllers", "controllers", enabled)
	start := func(ctx context.Context) error {
		for _, name := range enabled {
			iface, err := controller.Known()[name](factory)
			if err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			g.Go(func() error { return iface.Run(f.workers, ctx) })
		}
		base.SharedInformerFactory.Start(ctx.Done())
		base.KubeSharedInformerFactory.Start(ctx.Done())
		base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
		return nil
	}
	if !f.leaderElect {
		if err := start(ctx); err != nil {
			return err
		}
		return g.Wait()
	}

	le, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	id, _ := os.Hostname()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, f.leNamespace, "cert-manager-controller",
		le.Client.CoreV1(), le.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id + "-external-cert-manager-controller", EventRecorder: le.Recorder})
	if err != nil {
		return err
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
		ReleaseOnCancel: true, WatchDog: healthz,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				if err := start(ctx); err != nil {
					log.Error(err, "starting controllers")
					stop()
				}
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					log.Info("leader election lost")
					os.Exit(1)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	g.Go(func() error { elector.Run(ctx); return nil })
	return g.Wait()
}

// enabledControllers applies the --controllers list to the registered set.
func enabledControllers(spec []string) []string {
	known := make([]string, 0, len(controller.Known()))
	for n := range controller.Known() {
		known = append(known, n)
	}
	sort.Strings(known)
	var out []string
	for _, s := range spec {
		switch {
		case s == "*":
			out = append(out, known...)
		case strings.HasPrefix(s, "-"):
			out = slices.DeleteFunc(out, func(n string) bool { return n == s[1:] })
		case slices.Contains(known, s):
			out = append(out, s)
		}
	}
	if !slices.Contains(spec, "*") && len(out) == 0 {
		// Only removals given: start from everything.
		out = append(out, known...)
		for _, s := range spec {
			out = slices.DeleteFunc(out, func(n string) bool { return "-"+n == s })
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func serveHealthz(ctx context.Context, g *errgroup.Group, addr string, le *leaderelection.HealthzAdaptor) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) {
		if err := le.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}
	mux.HandleFunc("/livez", ok)
	mux.HandleFunc("/healthz", ok)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	g.Go(func() error { <-ctx.Done(); return srv.Close() })
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	return nil
}
