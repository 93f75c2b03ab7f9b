// Package chartrender renders the operator's Helm chart offline with the Helm
// SDK, the way `helm template` does, so that tests in any tier take their
// manifests (RBAC, webhook configurations, the Deployment) from the chart
// instead of keeping copies that drift from what users install.
package chartrender

import (
	"fmt"
	"path/filepath"
	"sort"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/memcached-operator/test/manifests"
	"github.com/example/memcached-operator/test/repo"
)

// KubeVersion is the Kubernetes version the chart is rendered for: the one
// envtest and the testbed run, so Capabilities-dependent templates render as
// they will there.
var KubeVersion = chartutil.KubeVersion{Version: "v1.37.0", Major: "1", Minor: "37"}

// ChartDir is the operator chart's folder.
func ChartDir() string {
	return filepath.Join(repo.Root(), "charts", "memcached-operator")
}

// Render renders the chart as release releaseName in namespace with values,
// offline (lookup finds nothing, as in `helm template`), and returns every
// object it would create, `helm test` hooks included, CRDs excluded: those
// come from crds/ and are installed separately. Values are validated against
// values.schema.json first, so a bad value is an error here as in `helm install`.
func Render(releaseName, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	return render(releaseName, namespace, values, false)
}

// RenderUpgrade is Render for a `helm upgrade` of an installed release
// (`helm template --is-upgrade`): the pre-upgrade hooks come with it.
func RenderUpgrade(releaseName, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	return render(releaseName, namespace, values, true)
}

func render(releaseName, namespace string, values map[string]any, upgrade bool) ([]*unstructured.Unstructured, error) {
	rel, err := dryRun(releaseName, namespace, values, upgrade)
	if err != nil {
		return nil, err
	}
	objs, err := manifests.Decode(rel.Manifest)
	if err != nil {
		return nil, err
	}
	// Hooks come out of the engine in map order; sort them so callers see the
	// same list on every run.
	hooks := append([]*release.Hook(nil), rel.Hooks...)
	sort.Slice(hooks, func(i, j int) bool { return hooks[i].Path+hooks[i].Name < hooks[j].Path+hooks[j].Name })
	for _, h := range hooks {
		more, err := manifests.Decode(h.Manifest)
		if err != nil {
			return nil, fmt.Errorf("hook %s: %w", h.Path, err)
		}
		objs = append(objs, more...)
	}
	return objs, nil
}

// Release is Render's dry-run release, for tests that also need NOTES.txt or
// want to tell hooks from the main manifest.
func Release(releaseName, namespace string, values map[string]any) (*release.Release, error) {
	return dryRun(releaseName, namespace, values, false)
}

func dryRun(releaseName, namespace string, values map[string]any, upgrade bool) (*release.Release, error) {
	chrt, err := Load()
	if err != nil {
		return nil, err
	}
	install := action.NewInstall(&action.Configuration{})
	install.ReleaseName = releaseName
	install.Namespace = namespace
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.IsUpgrade = upgrade
	install.KubeVersion = &KubeVersion
	if values == nil {
		values = map[string]any{}
	}
	rel, err := install.Run(chrt, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", chrt.Name(), err)
	}
	return rel, nil
}

// Load loads the chart from ChartDir.
func Load() (*chart.Chart, error) {
	chrt, err := loader.Load(ChartDir())
	if err != nil {
		return nil, fmt.Errorf("loading chart: %w", err)
	}
	return chrt, nil
}
