// Package build holds the wrapper modules that build the testbed's and the
// bench's components (each folder is a module of its own), and this check.
package build

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// separate are modules the wrappers may require at different versions: a
// component that does not build with another's version of them.
var separate = []string{
	"github.com/prometheus/prometheus",                // prometheus-operator is written against an older one
	"github.com/prometheus/alertmanager",              // likewise
	"github.com/prometheus/exporter-toolkit",          // likewise
	"github.com/prometheus/sigv4",                     // likewise
	"sigs.k8s.io/controller-runtime",                  // likewise
	"github.com/KimMachineGun/automemlimit",           // likewise: v1 dropped a function it calls
	"google.golang.org/api",                           // cert-manager's cloud DNS solvers
	"k8s.io/cri-api",                                  // kube-network-policies' NRI plugin
	"github.com/opencontainers/runtime-spec",          // likewise
	"github.com/mdlayher/", "github.com/vishvananda/", // netlink libraries, likewise
}

// TestWrappersShareVersions: every module two wrappers both build from is
// at one version in both. Go's build cache then compiles each of its
// packages once for all the components, instead of once for each: on a
// machine with cold caches the component builds are the largest part of a
// CI run.
func TestWrappersShareVersions(t *testing.T) {
	mods, err := filepath.Glob("*/go.mod")
	if err != nil || len(mods) == 0 {
		t.Fatalf("no wrapper modules found: %v", err)
	}
	versions := map[string]map[string][]string{} // module → version → wrappers
	for _, path := range mods {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := modfile.ParseLax(path, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Require {
			p, v := r.Mod.Path, r.Mod.Version
			if v == "v0.0.0" || slices.ContainsFunc(separate, func(s string) bool { return p == s || strings.HasSuffix(s, "/") && strings.HasPrefix(p, s) }) {
				continue // v0.0.0: a Kubernetes staging module, replaced
			}
			if versions[p] == nil {
				versions[p] = map[string][]string{}
			}
			versions[p][v] = append(versions[p][v], filepath.Dir(path))
		}
	}
	var diverged []string
	for p, byVersion := range versions {
		if len(byVersion) > 1 {
			var parts []string
			for v, wrappers := range byVersion {
				parts = append(parts, v+" ("+strings.Join(wrappers, ", ")+")")
			}
			sort.Strings(parts)
			diverged = append(diverged, p+": "+strings.Join(parts, ", "))
		}
	}
	sort.Strings(diverged)
	if len(diverged) > 0 {
		t.Errorf("%d modules are required at more than one version; raise each wrapper to the highest (go get MODULE@VERSION, go mod tidy):\n%s",
			len(diverged), strings.Join(diverged, "\n"))
	}
}
