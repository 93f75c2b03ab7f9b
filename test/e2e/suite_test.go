//go:build e2e

// Package e2e holds the tests that run against a real cluster: the testbed
// that `make cluster-up` starts (test/testbed). They read the kubeconfig
// from $KUBECONFIG, else $TESTBED_DIR/kubeconfig, else
// <repo>/_output/testbed/kubeconfig, and the image names from images.env
// beside it.
//
// Every suite has namespaces of its own, deletes them with --wait before it
// creates them, and without waiting when it ends: nothing after it waits for
// its pods to stop.
package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/testenv"
)

// pollInterval is how often Eventually and Consistently try again, unless a
// spec says otherwise.
const pollInterval = 250 * time.Millisecond

var (
	cfg       *rest.Config
	k8s       client.Client
	clientset *kubernetes.Clientset
	// images holds the testbed's images.env (MEMCACHED_IMAGE, PROBE_IMAGE, ...).
	images map[string]string
	// cluster holds the testbed's cluster.env (NODES, NODE_NAMES), written by
	// cluster-up.sh; empty for a cluster that has none.
	cluster map[string]string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	// Many polls start kubectl, a new process each time: at Gomega's 10 ms
	// default one would start back to back for as long as a wait lasts,
	// taking the CPU the cluster under test runs on.
	SetDefaultEventuallyPollingInterval(pollInterval)
	SetDefaultConsistentlyPollingInterval(pollInterval)
	testenv.RunSpecs(t, "e2e (testbed cluster)")
}

// testbedDir is where `make cluster-up` keeps the kubeconfig and images.env.
func testbedDir() string {
	if d := os.Getenv("TESTBED_DIR"); d != "" {
		return d
	}
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..", "_output", "testbed")
}

var _ = BeforeSuite(func() {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		kubeconfig = filepath.Join(testbedDir(), "kubeconfig")
	}
	_, err := os.Stat(kubeconfig)
	Expect(err).NotTo(HaveOccurred(), "no kubeconfig: start the testbed with `make cluster-up`")
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cmapi.AddToScheme(scheme))
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	clientset, err = kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())

	images, err = readEnv(filepath.Join(filepath.Dir(kubeconfig), "images.env"))
	Expect(err).NotTo(HaveOccurred(), "no images.env beside the kubeconfig: run `make images`")
	cluster, err = readEnv(filepath.Join(filepath.Dir(kubeconfig), "cluster.env"))
	if os.IsNotExist(err) {
		cluster, err = map[string]string{}, nil
	}
	Expect(err).NotTo(HaveOccurred())
})

// readEnv reads KEY=VALUE lines (comments and blank lines skipped).
func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	env := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env, s.Err()
}
