package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot file names under the output folder (docs/performance.md links the
// copies in docs/bench/).
const (
	plotTimeline  = "converge-timeline.png"
	plotWorkers   = "converge-vs-workers.png"
	plotN         = "converge-vs-n.png"
	plotQPS       = "converge-vs-qps.png"
	plotAdmission = "admission-latency.png"
)

var (
	colorOperator  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorReference = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
)

// plots draws what the results hold; a plot without data is skipped.
func plots(r *results, dir string) error {
	// A plot this run has no data for must not survive from an earlier run.
	for _, f := range []string{plotTimeline, plotWorkers, plotN, plotQPS, plotAdmission} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := plotTimelines(r, filepath.Join(dir, plotTimeline)); err != nil {
		return err
	}
	var byWorkers, byN, byQPS []sweepPoint
	for _, p := range r.Sweep {
		switch p.Sweep {
		case "workers":
			byWorkers = append(byWorkers, p)
		case "n":
			byN = append(byN, p)
		case "qps":
			byQPS = append(byQPS, p)
		}
	}
	if len(byWorkers) > 1 {
		sort.Slice(byWorkers, func(i, j int) bool { return byWorkers[i].Workers < byWorkers[j].Workers })
		if err := plotSweep(byWorkers, fmt.Sprintf("Converge time vs workers (N=%d)", r.Config.N), "--max-concurrent-reconciles (reference: workers)",
			func(p sweepPoint) float64 { return float64(p.Workers) }, filepath.Join(dir, plotWorkers)); err != nil {
			return err
		}
	}
	if len(byN) > 1 {
		sort.Slice(byN, func(i, j int) bool { return byN[i].N < byN[j].N })
		if err := plotSweep(byN, fmt.Sprintf("Converge time vs N (%d workers)", r.Config.Workers), "fleets (N)",
			func(p sweepPoint) float64 { return float64(p.N) }, filepath.Join(dir, plotN)); err != nil {
			return err
		}
	}
	if len(byQPS) > 1 {
		sort.Slice(byQPS, func(i, j int) bool { return byQPS[i].QPS < byQPS[j].QPS })
		if err := plotSweep(byQPS, fmt.Sprintf("Converge time vs the operator's client QPS limit (N=%d, %d workers)", r.Config.N, r.Config.Workers),
			"--kube-api-qps (0: no limit; reference: never limited)",
			func(p sweepPoint) float64 { return p.QPS }, filepath.Join(dir, plotQPS)); err != nil {
			return err
		}
	}
	if len(r.Admission) > 0 {
		return plotAdmissionLatency(r.Admission, filepath.Join(dir, plotAdmission))
	}
	return nil
}

// plotTimelines is the share of fleets ready against time, for the
// operator and the reference, converge and resize.
func plotTimelines(r *results, file string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Fleets ready over time (N=%d, %d workers)", r.Config.N, r.Config.Workers)
	p.X.Label.Text = "seconds since the user's first request"
	p.Y.Label.Text = "fleets ready"
	p.Add(plotter.NewGrid())
	lines := 0
	for _, s := range []struct {
		name   string
		pair   *pairResult
		resize bool
		col    color.Color
	}{
		{"operator converge", r.Operator, false, colorOperator},
		{"reference converge", r.Reference, false, colorReference},
		{"operator resize", r.Operator, true, colorOperator},
		{"reference resize", r.Reference, true, colorReference},
	} {
		if s.pair == nil {
			continue
		}
		ph := s.pair.Converge
		if s.resize {
			ph = s.pair.Resize
		}
		if ph == nil || len(ph.ReadyAt) == 0 {
			continue
		}
		pts := make(plotter.XYs, 0, len(ph.ReadyAt)+1)
		pts = append(pts, plotter.XY{X: 0, Y: 0})
		for i, t := range ph.ReadyAt {
			pts = append(pts, plotter.XY{X: t, Y: float64(i + 1)})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = s.col
		l.Width = vg.Points(1.5)
		if s.resize {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(s.name, l)
		lines++
	}
	if lines == 0 {
		return nil
	}
	p.Legend.Top, p.Legend.Left = false, false
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, file)
}

func plotSweep(pts []sweepPoint, title, xLabel string, x func(sweepPoint) float64, file string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "seconds until every fleet is ready"
	p.Add(plotter.NewGrid())
	op, ref := make(plotter.XYs, len(pts)), make(plotter.XYs, len(pts))
	for i, s := range pts {
		op[i] = plotter.XY{X: x(s), Y: s.OperatorSeconds}
		ref[i] = plotter.XY{X: x(s), Y: s.ReferenceSeconds}
	}
	for _, l := range []struct {
		name string
		xys  plotter.XYs
		col  color.Color
	}{{"operator", op, colorOperator}, {"reference", ref, colorReference}} {
		line, points, err := plotter.NewLinePoints(l.xys)
		if err != nil {
			return err
		}
		line.Color, points.Color = l.col, l.col
		p.Add(line, points)
		p.Legend.Add(l.name, line, points)
	}
	p.Legend.Top, p.Legend.Left = true, true
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, file)
}

func plotAdmissionLatency(adm []admissionResult, file string) error {
	p := plot.New()
	p.Title.Text = "Admission latency (open loop)"
	p.X.Label.Text = "requests per second"
	p.Y.Label.Text = "milliseconds (log scale)"
	// Sub-millisecond webhook calls and second-long saturated API server
	// requests on one axis.
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	byPath := map[string][]admissionResult{}
	var paths []string
	for _, a := range adm {
		if _, ok := byPath[a.Path]; !ok {
			paths = append(paths, a.Path)
		}
		byPath[a.Path] = append(byPath[a.Path], a)
	}
	i := 0
	for _, path := range paths {
		for _, q := range []struct {
			name string
			v    func(admissionResult) float64
		}{{"p50", func(a admissionResult) float64 { return a.P50Ms }}, {"p99", func(a admissionResult) float64 { return a.P99Ms }}} {
			xys := make(plotter.XYs, len(byPath[path]))
			for j, a := range byPath[path] {
				xys[j] = plotter.XY{X: float64(a.Rate), Y: max(q.v(a), 0.01)}
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return err
			}
			line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
			points.Shape = plotutil.Shape(i)
			p.Add(line, points)
			p.Legend.Add(q.name+" "+path, line, points)
			i++
		}
	}
	p.Legend.Top, p.Legend.Left = true, true
	return p.Save(16*vg.Centimeter, 10*vg.Centimeter, file)
}
