package chart_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// promtool is Prometheus' own rule checker, built from the module proxy by
// `make test` (hack/tool.sh promtool) and passed in PROMTOOL.
func promtool(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		t.Fatal("PROMTOOL is not set: run the tests with `make test`, which builds promtool once from the module proxy")
	}
	return p
}

func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestPrometheusRuleWithPromtool checks the rendered rules with `promtool
// check rules` and runs their unit tests (testdata/prometheusrule-tests.yaml)
// with `promtool test rules`: each alert fires on the series it is about,
// after its `for`, with the labels and annotations an on-call engineer sees.
func TestPrometheusRuleWithPromtool(t *testing.T) {
	g := NewWithT(t)
	r := render(t, map[string]any{"prometheusRule": map[string]any{"enabled": true}})
	spec, _, _ := unstructured.NestedMap(r.find("PrometheusRule", namespace, fullname).Object, "spec")
	rules, err := yaml.Marshal(spec)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600)).To(Succeed())
	tests, err := os.ReadFile(filepath.Join("testdata", "prometheusrule-tests.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "tests.yaml"), tests, 0o600)).To(Succeed())

	g.Expect(runPromtool(t, dir, "check", "rules", "rules.yaml")).To(ContainSubstring("SUCCESS: 8 rules found"))
	g.Expect(runPromtool(t, dir, "test", "rules", "tests.yaml")).To(ContainSubstring("SUCCESS"))
}

// TestGrafanaDashboardQueriesParse has promtool parse every query of the
// dashboard, written as recording rules with Grafana's variables filled in.
func TestGrafanaDashboardQueriesParse(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "charts", "memcached-operator", "dashboards", "memcached-fleets.json"))
	g.Expect(err).NotTo(HaveOccurred())
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	g.Expect(json.Unmarshal(raw, &dash)).To(Succeed())
	fill := strings.NewReplacer("$__rate_interval", "5m", "$namespace", "apps", "$fleet", ".*")
	var rules []map[string]any
	for i, p := range dash.Panels {
		for j, tg := range p.Targets {
			rules = append(rules, map[string]any{"record": "dashboard:panel" + string(rune('a'+i)) + string(rune('a'+j)), "expr": fill.Replace(tg.Expr)})
		}
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "dashboard.yaml"), out, 0o600)).To(Succeed())
	g.Expect(runPromtool(t, dir, "check", "rules", "dashboard.yaml")).To(ContainSubstring("SUCCESS"))
}
