package main

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"

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

// defaultGCPercent lets the heap grow half past what is live, not Go's
// default of all of it: the operator's live heap is its caches, so the
// garbage between collections was most of the rest of its memory, and
// collecting it more often costs a few milliseconds of CPU a fleet.
const defaultGCPercent = 50

// applyGCPercent sets the collector's heap growth, unless GOGC in the
// environment set it. With a headroom above 0 the growth is raised after
// each collection for as long as percent of the live heap is less than
// headroom bytes; the returned func stops that.
func applyGCPercent(percent int, headroom int64, gogcSet bool) (stop func()) {
	if gogcSet {
		return func() {}
	}
	debug.SetGCPercent(percent)
	if headroom <= 0 {
		return func() {}
	}
	live, set := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, percent
	return afterEachGC(func() {
		metrics.Read(live)
		if p := gcPercentFor(live[0].Value.Uint64(), percent, headroom); p != set {
			debug.SetGCPercent(p)
			set = p
		}
	})
}

// defaultGCHeadroom is the least the heap may grow between collections. A
// small operator's live heap is a few MiB, and half of it is a collection
// every few webhook requests under load, each one slowing the requests it
// overlaps; a thousand fleets' half is more than this and is left alone.
const defaultGCHeadroom = "16Mi"

// maxGCPercent bounds the growth a tiny live heap would otherwise be given.
const maxGCPercent = 10000

// gcPercentFor is the heap growth, in percent of live bytes, that is at
// least percent and lets the heap grow by at least headroom bytes.
func gcPercentFor(live uint64, percent int, headroom int64) int {
	if headroom <= 0 || live*uint64(percent)/100 >= uint64(headroom) {
		return percent
	}
	if live == 0 {
		return maxGCPercent
	}
	return int(min(uint64(maxGCPercent), (uint64(headroom)*100+live-1)/live))
}

// gcSentinel is unreachable from its allocation on: its finalizer runs
// once the collection that finds it has ended. It holds a pointer so that
// it is not batched with other small objects, which would keep it alive.
type gcSentinel struct{ _ *byte }

// afterEachGC calls f after every collection until stop is called; once
// stop has returned, f is not running and never runs again.
func afterEachGC(f func()) (stop func()) {
	var mu sync.Mutex
	stopped := false
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
			mu.Lock()
			defer mu.Unlock()
			if !stopped {
				f()
				arm()
			}
		})
	}
	arm()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
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
