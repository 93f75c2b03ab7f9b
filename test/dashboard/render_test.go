package dashboard

import (
	"context"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestExpand(t *testing.T) {
	g := NewWithT(t)
	vars := map[string]string{"namespace": "ns", "fleet": "cache", "fleets": "all"}
	g.Expect(Expand(`rate(x{namespace="$namespace", service=~"${fleet}"}[$__rate_interval]) + $fleets`, vars, "30s")).
		To(Equal(`rate(x{namespace="ns", service=~"cache"}[30s]) + all`))
}

func TestLegend(t *testing.T) {
	g := NewWithT(t)
	g.Expect(legend("{{pod}} used", map[string]string{"pod": "p-1"})).To(Equal("p-1 used"))
	g.Expect(legend("{{ service }} {{command}}", map[string]string{"service": "s", "command": "get"})).To(Equal("s get"))
}

// TestRenderChartDashboard draws the chart's own dashboard from a fake
// Prometheus: every query reaches it expanded, and every panel is counted.
func TestRenderChartDashboard(t *testing.T) {
	g := NewWithT(t)
	d, err := Load(filepath.Join("..", "..", "charts", "memcached-operator", "dashboards", "memcached-fleets.json"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Panels).NotTo(BeEmpty())
	end := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var queries []string
	fake := func(_ context.Context, expr string, start, stop time.Time, step time.Duration) ([]Series, error) {
		queries = append(queries, expr)
		s := Series{Labels: map[string]string{"pod": "cache-0", "service": "cache", "name": "cache", "command": "get"}}
		for ts := start; !ts.After(stop); ts = ts.Add(step) {
			s.Times = append(s.Times, ts)
			s.Values = append(s.Values, float64(ts.Sub(start)/time.Second))
		}
		// What Prometheus answers for a ratio before there is anything to divide.
		s.Values[0] = math.NaN()
		nothing := Series{Labels: map[string]string{"pod": "cache-1"}, Times: []time.Time{start}, Values: []float64{math.NaN()}}
		return []Series{s, nothing}, nil
	}
	out := filepath.Join(t.TempDir(), "dashboard.png")
	res, err := Render(context.Background(), d, fake, Options{
		Vars: map[string]string{"namespace": "ns", "fleet": "cache"}, RateInterval: "30s",
		Start: end.Add(-5 * time.Minute), End: end, Step: 15 * time.Second,
	}, out)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(HaveLen(len(d.Panels)))
	for _, p := range d.Panels {
		g.Expect(res[p.Title]).To(Equal(len(p.Targets)), p.Title)
	}
	for _, q := range queries {
		g.Expect(q).NotTo(ContainSubstring("$"), "every variable is filled in")
	}
	f, err := os.Open(out)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img.Bounds().Dx()).To(BeNumerically(">", 1000))
	g.Expect(strings.Join(queries, "\n")).To(ContainSubstring(`namespace="ns"`))
}
