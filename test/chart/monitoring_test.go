package chart_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/example/memcached-operator/internal/controller/memcached"
	"github.com/example/memcached-operator/internal/exporter"
)

// describer records the names of the metrics registered with it.
type describer struct{ names sets.Set[string] }

var fqName = regexp.MustCompile(`fqName: "([a-z_:]+)"`)

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 100)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names.Insert(m[1])
		}
	}
	return nil
}
func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}
func (d *describer) Unregister(prometheus.Collector) bool { return true }

// knownMetrics are the series the exporter and the operator serve, and
// Prometheus' own up.
func knownMetrics(t *testing.T) sets.Set[string] {
	d := &describer{names: sets.New("up")}
	d.MustRegister(exporter.NewCollector("127.0.0.1:1", time.Second, slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err := memcached.RegisterMetrics(d, fake.NewClientBuilder().Build(), nil); err != nil {
		t.Fatal(err)
	}
	return d.names
}

var metricName = regexp.MustCompile(`\b(memcached_[a-z_]+|up)\b`)

// usedMetrics are the metric names a PromQL expression reads (label
// values and names in braces are not metric names, so those are cut out).
func usedMetrics(expr string) []string {
	expr = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(expr, "{}")
	expr = regexp.MustCompile(`\((?:[a-z_]+, )*[a-z_]+\)`).ReplaceAllString(expr, "()")
	return metricName.FindAllString(expr, -1)
}

func TestPrometheusRule(t *testing.T) {
	g := NewWithT(t)
	r := render(t, map[string]any{"prometheusRule": map[string]any{"enabled": true, "notAvailableFor": "3m", "labels": map[string]any{"release": "prom"}}})
	pr := r.find("PrometheusRule", namespace, fullname)
	g.Expect(pr).NotTo(BeNil())
	g.Expect(pr.GetLabels()).To(HaveKeyWithValue("release", "prom"))
	known := knownMetrics(t)
	groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
	alerts := map[string]map[string]any{}
	for _, grp := range groups {
		for _, rule := range grp.(map[string]any)["rules"].([]any) {
			rule := rule.(map[string]any)
			name := rule["alert"].(string)
			alerts[name] = rule
			ann := rule["annotations"].(map[string]any)
			for _, key := range []string{"summary", "description", "runbook"} {
				g.Expect(ann).To(HaveKeyWithValue(key, Not(BeEmpty())), "%s has a %s an on-call engineer can act on", name, key)
			}
			g.Expect(rule["labels"]).To(HaveKey("severity"), name)
			for _, m := range usedMetrics(rule["expr"].(string)) {
				g.Expect(known.Has(m)).To(BeTrue(), "%s reads %s, which nothing exports", name, m)
			}
		}
	}
	g.Expect(alerts).To(HaveLen(8))
	g.Expect(alerts).To(HaveKey("MemcachedFleetNotAvailable"))
	g.Expect(alerts["MemcachedFleetNotAvailable"]["for"]).To(Equal("3m"))
	for _, a := range []string{"MemcachedDown", "MemcachedExporterDown", "MemcachedEvictionsHigh", "MemcachedHitRatioLow",
		"MemcachedConnectionsNearLimit", "MemcachedListenerDisabled", "MemcachedOperatorReconcileErrors"} {
		g.Expect(alerts).To(HaveKey(a))
	}
	g.Expect(render(t, nil).find("PrometheusRule", namespace, fullname)).To(BeNil(), "off by default")
}

func TestGrafanaDashboard(t *testing.T) {
	g := NewWithT(t)
	r := render(t, map[string]any{"grafanaDashboard": map[string]any{"enabled": true, "namespace": "monitoring"}})
	cm := r.find("ConfigMap", "monitoring", fullname+"-dashboard")
	g.Expect(cm).NotTo(BeNil())
	g.Expect(cm.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "memcached-fleets.json")
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	g.Expect(json.Unmarshal([]byte(raw), &dash)).To(Succeed())
	g.Expect(dash.UID).To(Equal("memcached-fleets"))
	g.Expect(dash.Panels).NotTo(BeEmpty())
	known := knownMetrics(t)
	for _, p := range dash.Panels {
		g.Expect(p.Targets).NotTo(BeEmpty(), p.Title)
		for _, tg := range p.Targets {
			used := usedMetrics(tg.Expr)
			g.Expect(used).NotTo(BeEmpty(), "%s: %s", p.Title, tg.Expr)
			for _, m := range used {
				g.Expect(known.Has(m)).To(BeTrue(), "panel %q reads %s, which nothing exports", p.Title, m)
			}
		}
	}
	g.Expect(strings.Count(raw, `"expr"`)).To(BeNumerically(">=", len(dash.Panels)))
}
