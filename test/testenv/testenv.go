// Package testenv starts the envtest tier's control plane — a real etcd and
// kube-apiserver built from source by `make envtest` — with the chart's CRD
// installed, so that every suite tests the CRD users get.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/example/memcached-operator/test/repo"
)

// Options adds to the environment every suite shares.
type Options struct {
	// Webhooks, when set, makes envtest serve these webhook configurations
	// over real TLS to a local webhook server.
	Webhooks *envtest.WebhookInstallOptions
	// CertManagerCRDs also installs cert-manager's CRDs, from the cert-manager
	// Go module this repository requires.
	CertManagerCRDs bool
	// ServiceMonitorCRD also installs a stand-in for prometheus-operator's
	// ServiceMonitor CRD (ServiceMonitorCRDDir).
	ServiceMonitorCRD bool
}

// ServiceMonitorCRDDir holds the stand-in ServiceMonitor CRD, for suites
// that install it themselves mid-run.
func ServiceMonitorCRDDir() string {
	return filepath.Join(RepoRoot(), "test", "testenv", "testdata", "crds")
}

// RepoRoot is the repository's top folder.
func RepoRoot() string { return repo.Root() }

// ChartDir is the operator chart's folder.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "memcached-operator") }

// New returns an environment with the chart's CRDs; Start it in BeforeSuite.
// It fails early, with the command that fixes it, when the binaries are missing.
func New(opts Options) (*envtest.Environment, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds etcd and kube-apiserver once from the module proxy")
	}
	paths := []string{filepath.Join(ChartDir(), "crds")}
	if opts.CertManagerCRDs {
		dir, err := ModuleDir("github.com/cert-manager/cert-manager")
		if err != nil {
			return nil, err
		}
		paths = append(paths, filepath.Join(dir, "deploy", "crds"))
	}
	if opts.ServiceMonitorCRD {
		paths = append(paths, ServiceMonitorCRDDir())
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     paths,
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s is too short for an API server starting while CI
		// runs the real-cluster suites beside it; a timed-out start is
		// retried from scratch and times out again.
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	// OpenShift and other hardened clusters run this plugin: it refuses an
	// owner reference with blockOwnerDeletion unless the writer may update
	// the owner's finalizers, which is what the operator's applies carry.
	env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	if opts.Webhooks != nil {
		env.WebhookInstallOptions = *opts.Webhooks
	}
	return env, nil
}

// ModuleDir is where the Go module cache holds the version of module that
// go.mod requires.
func ModuleDir(module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		// Listed but not downloaded yet.
		if err := exec.Command("go", "mod", "download", module).Run(); err != nil {
			return "", fmt.Errorf("downloading module %s: %w", module, err)
		}
		return ModuleDir(module)
	}
	return dir, nil
}

// RunSpecs runs a Ginkgo suite; under `go test -v` (as `make test` runs) it
// names every spec with its duration, so a run shows what it proved.
func RunSpecs(t *testing.T, description string) bool {
	suite, reporter := ginkgo.GinkgoConfiguration()
	reporter.Verbose = reporter.Verbose || testing.Verbose()
	reporter.NoColor = reporter.NoColor || os.Getenv("CI") != ""
	return ginkgo.RunSpecs(t, description, suite, reporter)
}

// NewNamespace creates a namespace with a generated name from prefix, so that
// specs never see each other's objects, and returns its name.
func NewNamespace(ctx context.Context, c client.Client, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := c.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("creating namespace %s*: %w", prefix, err)
	}
	return ns.Name, nil
}
