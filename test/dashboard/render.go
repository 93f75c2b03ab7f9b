// Package dashboard renders the chart's Grafana dashboard
// (charts/memcached-operator/dashboards) from a live Prometheus into one PNG,
// without Grafana: each panel's queries run as range queries, with the
// dashboard's variables filled in, and each panel becomes a plot at its grid
// position. The e2e suite uses it to prove that every panel shows data from
// a real fleet, and keeps the picture.
package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Series is one line of a range query's answer.
type Series struct {
	Labels map[string]string
	Times  []time.Time
	Values []float64
}

// RangeQuery runs a PromQL range query.
type RangeQuery func(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error)

// Dashboard is the part of a Grafana dashboard the renderer reads.
type Dashboard struct {
	Title  string  `json:"title"`
	Panels []Panel `json:"panels"`
}

// Panel is one Grafana panel: a title, a place on the 24-column grid, and
// its queries.
type Panel struct {
	Title   string `json:"title"`
	GridPos struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// Load reads a dashboard's JSON.
func Load(path string) (*Dashboard, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{}
	return d, json.Unmarshal(raw, d)
}

// Options say what to render.
type Options struct {
	// Vars fill the dashboard's variables ($namespace, $fleet, ...);
	// $__rate_interval is RateInterval.
	Vars         map[string]string
	RateInterval string
	Start, End   time.Time
	Step         time.Duration
}

// Result tells, per panel title, how many series its queries returned.
type Result map[string]int

var legendVar = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// Expand fills a query's variables; Grafana's `$name` and `${name}` forms.
func Expand(expr string, vars map[string]string, rateInterval string) string {
	all := map[string]string{"__rate_interval": rateInterval}
	for k, v := range vars {
		all[k] = v
	}
	// Longest names first, so $fleet does not eat $fleets.
	names := make([]string, 0, len(all))
	for k := range all {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, k := range names {
		expr = strings.ReplaceAll(expr, "${"+k+"}", all[k])
		expr = strings.ReplaceAll(expr, "$"+k, all[k])
	}
	return expr
}

// Render queries every panel and draws them into one PNG at out.
func Render(ctx context.Context, d *Dashboard, q RangeQuery, o Options, out string) (Result, error) {
	res := Result{}
	rows := 0
	for _, p := range d.Panels {
		rows = max(rows, p.GridPos.Y+p.GridPos.H)
	}
	// One grid unit: 1/24 of the width across, 30 points down (Grafana's
	// row height), so panels keep their proportions.
	const width = 1600
	unitW, unitH := vg.Length(width)/24, vg.Length(30)
	c := vgimg.New(vg.Length(width), unitH*vg.Length(rows)+40)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Path())
	title := draw.TextStyle{Color: color.Black, Font: plot.DefaultFont, XAlign: draw.XCenter}
	title.Font.Size = 18
	title.Handler = plot.DefaultTextHandler
	dc.FillText(title, vg.Point{X: vg.Length(width) / 2, Y: dc.Max.Y - 26}, d.Title)

	for _, p := range d.Panels {
		pl := plot.New()
		pl.Title.Text = p.Title
		pl.X.Tick.Marker = plot.TimeTicks{Format: "15:04:05"}
		pl.Legend.Top = true
		pl.Legend.TextStyle.Font.Size = 8
		n := 0
		for _, t := range p.Targets {
			series, err := q(ctx, Expand(t.Expr, o.Vars, o.RateInterval), o.Start, o.End, o.Step)
			if err != nil {
				return res, fmt.Errorf("panel %q: %w", p.Title, err)
			}
			for _, s := range series {
				if len(s.Values) == 0 {
					continue
				}
				// A ratio with nothing to divide is NaN at that step (a hit ratio
				// before any get); Grafana leaves a gap, so does this.
				pts := make(plotter.XYs, 0, len(s.Values))
				for i, v := range s.Values {
					if !math.IsNaN(v) && !math.IsInf(v, 0) {
						pts = append(pts, plotter.XY{X: float64(s.Times[i].Unix()), Y: v})
					}
				}
				if len(pts) == 0 {
					continue
				}
				line, err := plotter.NewLine(pts)
				if err != nil {
					return res, err
				}
				line.Color = plotutil.Color(n)
				line.Width = vg.Points(1.5)
				pl.Add(line)
				pl.Legend.Add(legend(t.LegendFormat, s.Labels), line)
				n++
			}
		}
		res[p.Title] = n
		x0 := unitW * vg.Length(p.GridPos.X)
		yTop := dc.Max.Y - 40 - unitH*vg.Length(p.GridPos.Y)
		area := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x0 + 4, Y: yTop - unitH*vg.Length(p.GridPos.H) + 4},
			Max: vg.Point{X: x0 + unitW*vg.Length(p.GridPos.W) - 4, Y: yTop - 4},
		}}
		pl.Draw(area)
	}
	f, err := os.Create(out)
	if err != nil {
		return res, err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(f); err != nil {
		_ = f.Close()
		return res, err
	}
	return res, f.Close()
}

// legend fills a Grafana legend format ({{label}}) from a series' labels.
func legend(format string, labels map[string]string) string {
	if format == "" {
		return fmt.Sprint(labels)
	}
	return legendVar.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendVar.FindStringSubmatch(m)[1]]
	})
}
