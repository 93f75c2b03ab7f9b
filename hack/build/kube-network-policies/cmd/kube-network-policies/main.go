// Command kube-network-policies enforces Kubernetes NetworkPolicies on one
// testbed node: kube-network-policies' controller (its pkg/networkpolicy,
// patched at build time by patch.sh to queue packets through the xtables
// NFQUEUE target) run as a node daemon beside kube-proxy. Upstream's main
// only knows the in-cluster config of a DaemonSet pod; the testbed has no
// such pod, so this main takes a kubeconfig. Only NetworkPolicy is enforced:
// the admin network policy APIs are not served by the testbed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() { os.Exit(run()) }

func run() int {
	var (
		kubeconfig, nodeName, metricsAddr string
		queueID                           int
		failOpen, dnsWorkaround           bool
	)
	flag.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the controller's identity (required)")
	flag.StringVar(&nodeName, "hostname-override", "", "name of the Node whose pods this process guards (required)")
	flag.IntVar(&queueID, "nfqueue-id", 100, "number of the nfqueue the first packet of each connection goes to")
	flag.BoolVar(&failOpen, "fail-open", false, "accept packets while no controller listens on the queue (default: drop)")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "", "address of the Prometheus metrics (off when empty)")
	// Kernels from 6.12 on have the conntrack fix this works around by
	// queueing DNS on PREROUTING as well (netfilter bug 1766); the testbed's is 6.18.
	flag.BoolVar(&dnsWorkaround, "netfilter-bug-1766-fix", false, "queue DNS packets on PREROUTING too (kernels before 6.12)")
	logging := logsapi.NewLoggingConfiguration()
	logsapi.AddGoFlags(logging, flag.CommandLine)
	flag.Parse()
	logs.InitLogs()
	if err := logsapi.ValidateAndApply(logging, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if kubeconfig == "" || nodeName == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig and --hostname-override are required")
		return 2
	}

	// cluster-down and node.sh stop with SIGTERM: the controller then deletes
	// its nftables table before the process ends.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logger := klog.FromContext(ctx)

	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		logger.Error(err, "loading the kubeconfig")
		return 1
	}
	config.UserAgent = "kube-network-policies/" + nodeName
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	config.ContentType = "application/vnd.kubernetes.protobuf"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		logger.Error(err, "creating the client")
		return 1
	}
	factory := informers.NewSharedInformerFactory(clientset, 0)

	if metricsAddr != "" {
		http.Handle("/metrics", promhttp.Handler())
		srv := &http.Server{Addr: metricsAddr, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				logger.Error(err, "metrics server")
			}
		}()
	}

	controller, err := networkpolicy.NewController(clientset,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil,
		networkpolicy.Config{
			FailOpen:            failOpen,
			QueueID:             queueID,
			NodeName:            nodeName,
			NetfilterBug1766Fix: dnsWorkaround,
			// containerd's NRI is off on the testbed (its socket path is
			// machine-wide): pod IPs come from the API server alone.
			NRIdisabled: true,
		})
	if err != nil {
		logger.Error(err, "creating the network policy controller")
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx) }()
	factory.Start(ctx.Done())

	select {
	case err = <-done:
		// Run returns early only when it could not open the nfqueue.
		logger.Error(err, "network policy controller stopped")
		return 1
	case <-ctx.Done():
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		logger.Info("controller did not stop within 5s")
	}
	return 0
}
