package main

import (
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// memoryTarget reads --memory-target: a quantity ("200Mi", or bytes), or a
// percentage of --memory-limit ("90%", the chart's, with the container's
// limit from the downward API). 0 or empty means none.
func memoryTarget(target, limit string) (int64, error) {
	if target == "" {
		return 0, nil
	}
	pct, isPct := strings.CutSuffix(target, "%")
	if !isPct {
		q, err := resource.ParseQuantity(target)
		if err != nil {
			return 0, fmt.Errorf("--memory-target %q: %w", target, err)
		}
		if q.Sign() < 0 {
			return 0, fmt.Errorf("--memory-target %q is negative", target)
		}
		return q.Value(), nil
	}
	p, err := strconv.ParseFloat(pct, 64)
	if err != nil || math.IsNaN(p) || p < 0 || p > 100 {
		return 0, fmt.Errorf("--memory-target %q: a percentage must be between 0%% and 100%%", target)
	}
	if limit == "" {
		return 0, fmt.Errorf("--memory-target %q is a share of --memory-limit, which is not set", target)
	}
	l, err := resource.ParseQuantity(limit)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit %q: %w", limit, err)
	}
	if l.Sign() <= 0 {
		return 0, fmt.Errorf("--memory-limit %q must be positive", limit)
	}
	return int64(float64(l.Value()) * p / 100), nil
}

// defaultGCPercent lets the heap grow half past the largest live heap, not
// Go's default of all of it: the operator's live heap is its caches, so the
// garbage between collections was most of the rest of its memory, and
// collecting it more often costs a few milliseconds of CPU a fleet.
const defaultGCPercent = 50

// applyGCPercent sets the collector's heap growth, unless GOGC in the
// environment set it.
func applyGCPercent(percent int, gogcSet bool) {
	if !gogcSet {
		debug.SetGCPercent(percent)
	}
}

// maxGCPercent is Go's default growth: the most tuneGC lets the heap grow
// past what is live.
const maxGCPercent = 100

// gcPercentFor is the growth past a live heap of live bytes that lets the
// heap reach the size it could reach at the largest live heap seen, peak:
// percent past peak, and at most maxGCPercent past live (never below
// percent). Memory at the peak is as --gc-percent sets it; below the peak,
// as when the caches hold everything and only reviews and passes allocate,
// the collector runs less often in the room the peak already took.
func gcPercentFor(live, peak uint64, percent int) int {
	if live == 0 || peak <= live {
		return percent
	}
	p := (float64(peak)*(1+float64(percent)/100)/float64(live) - 1) * 100
	return int(min(max(p, float64(percent)), maxGCPercent))
}

// gcTuner sets the collector's growth after each collection, from the live
// heap the last collection found and the largest any has found.
type gcTuner struct {
	percent, current int
	peak, cycles     uint64
	samples          []metrics.Sample
}

// newGCTuner starts from the collections so far: the growth is percent.
func newGCTuner(percent int) *gcTuner {
	t := &gcTuner{percent: percent, current: percent,
		samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}}
	t.observe()
	return t
}

// observe reads the runtime's counters and sets the growth if a
// collection has run since the last reading.
func (t *gcTuner) observe() {
	metrics.Read(t.samples)
	cycles := t.samples[1].Value.Uint64()
	if cycles == t.cycles {
		return
	}
	t.cycles = cycles
	live := t.samples[0].Value.Uint64()
	t.peak = max(t.peak, live)
	if p := gcPercentFor(live, t.peak, t.percent); p != t.current {
		debug.SetGCPercent(p)
		t.current = p
	}
}

// run observes every interval until ctx ends.
func (t *gcTuner) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.observe()
		}
	}
}

// applyMemoryTarget bounds the Go heap with a soft limit, so the garbage
// collector works harder before the container's memory limit is reached
// instead of the kernel killing it. The chart aims at 90% of the limit,
// not at the request: the bench measured a resize of a thousand fleets at
// four times the CPU (85 s against 22 s) with the target at a 64Mi request,
// because the caches' live heap sat just under it and the collector ran
// almost without pause. A GOMEMLIMIT in the environment is left as the
// user set it.
func applyMemoryTarget(target int64, gomemlimitSet bool) {
	if target > 0 && !gomemlimitSet {
		debug.SetMemoryLimit(target)
	}
}
