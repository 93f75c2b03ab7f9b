// Command memcached-operator runs the Memcached controller and its admission
// webhooks. This file is wiring only: flags, logger, scheme, manager, health
// checks and the SetupWithManager calls.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/memcached"
	"github.com/example/memcached-operator/internal/metricsauth"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/internal/restmapping"
	"github.com/example/memcached-operator/internal/webhookcert"
	"github.com/example/memcached-operator/webhooks"
)

// serviceAccountDir exists in every pod that mounts a token; its presence is
// how the operator knows it runs in-cluster and should elect a leader.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

type options struct {
	metricsAddr, probeAddr, metricsCertDir string
	pprofAddr                              string
	secureMetrics, enableHTTP2             bool
	leaderElect                            bool
	leaderElectionNamespace                string
	watchNamespaces                        string
	maxConcurrentReconciles                int
	kubeAPIQPS                             float64
	kubeAPIBurst                           int
	statusProgressInterval                 time.Duration
	statusProgressRate                     float64
	gracefulShutdown                       time.Duration
	enableWebhooks                         bool
	webhookPort                            int
	webhookCertDir                         string
	maxSize                                int
	defaultImage                           string
	defaultAppArmorProfile                 string
	exporterImage                          string
	platformAssignsUIDs                    bool
	memoryTarget, memoryLimit              string
	gcPercent                              int
	certs                                  certOptions
}

// certOptions are the flags of --webhook-cert-management=operator.
type certOptions struct {
	management                  string
	namespace, secret           string
	mutating, validating        string
	dnsNames                    string
	caValidity, servingValidity time.Duration
	metricsUseWebhookCert       bool
}

func main() {
	var o options
	_, statErr := os.Stat(serviceAccountDir)
	inCluster := os.Getenv("KUBERNETES_SERVICE_HOST") != "" && statErr == nil

	fs := flag.CommandLine
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, allowing only callers authorized by a SubjectAccessReview for GET /metrics.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "Folder with tls.crt and tls.key for the metrics server; empty generates a self-signed certificate.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "Address of the net/http/pprof endpoints (/debug/pprof/); \"0\" disables them. Bind it to loopback: profiles are not authenticated.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; /readyz waits for the webhook server to serve.")
	fs.BoolVar(&o.enableHTTP2, "enable-http2", false, "Serve HTTP/2 on the metrics and webhook servers (off: HTTP/2 rapid reset, CVE-2023-44487).")
	fs.BoolVar(&o.leaderElect, "leader-elect", inCluster, "Elect a leader so that only one replica reconciles (default true in-cluster, false outside).")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease; empty means the operator's own namespace.")
	fs.StringVar(&o.watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces to reconcile Memcached in; empty watches all namespaces.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 16, "Memcached resources reconciled in parallel. A pass mostly waits on the API server, so more workers keep fleets' statuses close behind their rollouts when many change at once.")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 0, "Requests a second the operator may send to the API server, one limiter for all its clients (0: no client-side limit, controller-runtime's default; the API server's priority and fairness still apply).")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 0, "Requests the client may send at once above --kube-api-qps (0: a second's worth, at least 10); only with --kube-api-qps.")
	fs.DurationVar(&o.statusProgressInterval, "status-progress-interval", 10*time.Second, "Least time between two status writes of a fleet that only report rollout progress before it is Available (transitions are written at once); 0 writes every change.")
	fs.Float64Var(&o.statusProgressRate, "status-progress-rate", 2, "Status writes a second that only report rollout progress, for all fleets together (held reports wait another --status-progress-interval; transitions are never held); 0 does not limit them.")
	fs.DurationVar(&o.gracefulShutdown, "graceful-shutdown-timeout", 20*time.Second, "How long the operator waits, once told to stop, for its work to end and its Lease to be released; keep it below the pod's grace period minus its preStop delay, or the kubelet kills it with the Lease held.")
	fs.BoolVar(&o.enableWebhooks, "enable-webhooks", true, "Serve the admission webhooks; turn off to run outside a cluster without certificates (make run).")
	fs.IntVar(&o.webhookPort, "webhook-port", webhook.DefaultPort, "Port of the webhook server.")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Folder with the webhook server's tls.crt and tls.key; rotated files are picked up without restart.")
	fs.IntVar(&o.maxSize, "max-size", 100, fmt.Sprintf("Largest spec.size a fleet may grow to, enforced by the webhooks and again by the controller (the CRD caps it at %d).", cachev1alpha1.SizeSchemaMaximum))
	fs.StringVar(&o.defaultImage, "default-image", "memcached:1.6", "Memcached image used when spec.image is empty.")
	fs.StringVar(&o.defaultAppArmorProfile, "default-apparmor-profile", "", "AppArmor profile pinned on new fleets that set no spec.appArmorProfile: RuntimeDefault, or empty for none. Set it only where every node runs AppArmor: the kubelet refuses such pods elsewhere.")
	fs.BoolVar(&o.platformAssignsUIDs, "platform-assigns-uids", false, "Leave the UID and GID of fleets that set no spec.runAsUser to the platform (OpenShift's restricted-v2 SCC assigns them from the namespace's range) instead of 11211. Changing it replaces those fleets' pods.")
	fs.StringVar(&o.exporterImage, "exporter-image", "", "Image of the exporter sidecar (it runs /memcached-exporter) when a fleet enables it without one; the chart passes the operator's own image.")
	fs.StringVar(&o.memoryTarget, "memory-target", "", "Heap size the garbage collector aims to stay under (a soft limit, like GOMEMLIMIT, which wins when set): a quantity such as 200Mi, or a percentage of --memory-limit; the chart passes 90%. Empty or 0: none.")
	fs.IntVar(&o.gcPercent, "gc-percent", defaultGCPercent, "How far the heap may grow past what is live before the garbage collector runs, in percent (GOGC, which wins when set); lower trades CPU for memory.")
	fs.StringVar(&o.memoryLimit, "memory-limit", "", "The container's memory limit, which a percentage --memory-target is a share of; the chart passes it through the downward API.")
	fs.StringVar(&o.certs.management, "webhook-cert-management", "files", "Where the webhook certificate comes from: files (tls.crt and tls.key in --webhook-cert-dir, from cert-manager or a mounted Secret) or operator (the operator keeps a CA and serving certificate in --webhook-cert-secret and the CA in both webhook configurations' caBundle).")
	fs.StringVar(&o.certs.namespace, "webhook-cert-namespace", os.Getenv("POD_NAMESPACE"), "Namespace of --webhook-cert-secret (operator mode); defaults to $POD_NAMESPACE.")
	fs.StringVar(&o.certs.secret, "webhook-cert-secret", "", "Secret holding ca.crt, ca.key, tls.crt and tls.key (operator mode).")
	fs.StringVar(&o.certs.mutating, "webhook-cert-mutating-configuration", "", "MutatingWebhookConfiguration whose caBundle the operator keeps (operator mode); with files, /readyz also waits until it trusts tls.crt. Either way /readyz marks each new caBundle seen with an annotation.")
	fs.StringVar(&o.certs.validating, "webhook-cert-validating-configuration", "", "ValidatingWebhookConfiguration whose caBundle the operator keeps (operator mode); with files, /readyz also waits until it trusts tls.crt. Either way /readyz marks each new caBundle seen with an annotation.")
	fs.StringVar(&o.certs.dnsNames, "webhook-cert-dns-names", "", "Comma-separated DNS names the serving certificate covers (operator mode).")
	fs.DurationVar(&o.certs.caValidity, "webhook-cert-ca-validity", 10*365*24*time.Hour, "Validity of a new webhook CA (operator mode); renewed when less than a third remains.")
	fs.DurationVar(&o.certs.servingValidity, "webhook-cert-validity", 365*24*time.Hour, "Validity of a new serving certificate (operator mode), at most the CA's; renewed when less than a third remains.")
	fs.BoolVar(&o.certs.metricsUseWebhookCert, "metrics-use-webhook-cert", false, "Serve metrics with the operator-managed webhook certificate (operator mode; it must cover the metrics Service's names).")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := run(o); err != nil {
		ctrl.Log.Error(err, "Operator stopped")
		os.Exit(1)
	}
}

func run(o options) error {
	if o.maxSize < 0 || o.maxSize > cachev1alpha1.SizeSchemaMaximum {
		return fmt.Errorf("--max-size must be between 0 and %d", cachev1alpha1.SizeSchemaMaximum)
	}
	if o.defaultAppArmorProfile != "" && o.defaultAppArmorProfile != string(corev1.AppArmorProfileTypeRuntimeDefault) {
		return fmt.Errorf("--default-apparmor-profile must be RuntimeDefault or empty, not %q", o.defaultAppArmorProfile)
	}
	target, err := memoryTarget(o.memoryTarget, o.memoryLimit)
	if err != nil {
		return err
	}
	_, gomemlimitSet := os.LookupEnv("GOMEMLIMIT")
	applyMemoryTarget(target, gomemlimitSet)
	if o.gcPercent <= 0 {
		return fmt.Errorf("--gc-percent must be positive, not %d", o.gcPercent)
	}
	_, gogcSet := os.LookupEnv("GOGC")
	applyGCPercent(o.gcPercent, gogcSet)
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))

	var tlsOpts []func(*tls.Config)
	if !o.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{
		BindAddress:   o.metricsAddr,
		SecureServing: o.secureMetrics,
		CertDir:       o.metricsCertDir,
		TLSOpts:       tlsOpts,
	}
	if o.secureMetrics {
		metricsOpts.FilterProvider = metricsauth.Filter
	}

	restCfg := ctrl.GetConfigOrDie()
	if err := clientRateLimit(restCfg, o.kubeAPIQPS, o.kubeAPIBurst); err != nil {
		return err
	}
	webhookTLSOpts := tlsOpts
	var rotator *webhookcert.Rotator
	switch o.certs.management {
	case "files":
	case "operator":
		if rotator, err = newRotator(restCfg, o.certs); err != nil {
			return err
		}
		// Served from memory: no writable folder, and readiness knows which
		// certificate is served.
		serveRotator := func(c *tls.Config) { c.GetCertificate = rotator.GetCertificate }
		webhookTLSOpts = append(slices.Clone(tlsOpts), serveRotator)
		if o.certs.metricsUseWebhookCert {
			metricsOpts.TLSOpts = webhookTLSOpts
		}
	default:
		return fmt.Errorf("--webhook-cert-management must be files or operator, not %q", o.certs.management)
	}

	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "memcached-operator.cache.example.com",
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.gracefulShutdown,
		WebhookServer: webhook.NewServer(webhook.Options{
			Port:    o.webhookPort,
			CertDir: o.webhookCertDir,
			TLSOpts: webhookTLSOpts,
		}),
		Cache:          memcached.CacheOptions(splitList(o.watchNamespaces)),
		MapperProvider: restmapping.Provider(apiutil.NewDynamicRESTMapper),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	defaults := policy.Config{DefaultImage: o.defaultImage, ExporterImage: o.exporterImage,
		AppArmorProfile: corev1.AppArmorProfileType(o.defaultAppArmorProfile), PlatformAssignsUIDs: o.platformAssignsUIDs}
	limits := policy.Limits{MaxSize: int32(o.maxSize)}
	if err := (&memcached.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("memcached-operator"),
		Defaults:  defaults,
		Limits:    limits,

		ProgressInterval: o.statusProgressInterval,
		ProgressRate:     o.statusProgressRate,
	}).SetupWithManager(mgr, o.maxConcurrentReconciles); err != nil {
		return fmt.Errorf("setting up controller: %w", err)
	}

	if err := memcached.RegisterMetrics(ctrlmetrics.Registry, mgr.GetCache(), mgr.Elected()); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	ready := healthz.Ping
	if o.enableWebhooks {
		if err := webhooks.SetupWithManager(mgr, webhooks.Options{
			Defaults: defaults,
			Limits:   limits,
		}); err != nil {
			return fmt.Errorf("setting up webhooks: %w", err)
		}
		// Not ready until the webhook server answers TLS, so a Service never
		// sends admission requests to a pod that would refuse them.
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	// Ready only when the API server trusts what is served, so `helm install
	// --wait` returns with admission working.
	var trusted healthz.Checker
	switch {
	case rotator != nil:
		if err := mgr.Add(rotator); err != nil {
			return fmt.Errorf("adding webhook certificate rotator: %w", err)
		}
		trusted = rotator.ReadyCheck
	case o.enableWebhooks && o.certs.mutating != "" && o.certs.validating != "":
		trusted = webhookcert.FileReadyCheck(mgr.GetAPIReader(), mgr.GetClient(), o.webhookCertDir, o.certs.mutating, o.certs.validating)
	}
	if trusted != nil {
		started := ready
		ready = func(req *http.Request) error {
			if err := started(req); err != nil {
				return err
			}
			return trusted(req)
		}
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}

	ctrl.Log.Info("Starting manager", "watchNamespaces", o.watchNamespaces, "webhooks", o.enableWebhooks, "maxSize", o.maxSize)
	return mgr.Start(ctrl.SetupSignalHandler())
}

func newRotator(cfg *rest.Config, o certOptions) (*webhookcert.Rotator, error) {
	r, err := webhookcert.New(cfg, webhookcert.Options{
		Namespace:                      o.namespace,
		SecretName:                     o.secret,
		MutatingWebhookConfiguration:   o.mutating,
		ValidatingWebhookConfiguration: o.validating,
		CAName:                         o.secret + "-ca",
		Policy: webhookcert.Policy{
			DNSNames:        splitList(o.dnsNames),
			CAValidity:      o.caValidity,
			ServingValidity: o.servingValidity,
			RenewFraction:   1.0 / 3,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("--webhook-cert-management=operator: %w", err)
	}
	return r, nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
