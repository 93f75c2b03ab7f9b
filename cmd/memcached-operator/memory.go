package main

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"

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
// environment set it.
func applyGCPercent(percent int, gogcSet bool) {
	if !gogcSet {
		debug.SetGCPercent(percent)
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
