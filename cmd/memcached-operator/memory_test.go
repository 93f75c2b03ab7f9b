package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestMemoryTarget(t *testing.T) {
	for _, c := range []struct {
		target, limit string
		want          int64
	}{
		{"", "", 0}, {"0", "", 0}, {"64Mi", "", 64 << 20}, {"67108864", "", 64 << 20}, {"100M", "", 100e6},
		// A quantity ignores the limit.
		{"64Mi", "256Mi", 64 << 20},
		// A share of the limit, in bytes as the downward API gives it.
		{"90%", "268435456", 241591910}, {"90%", "256Mi", 241591910}, {"100%", "1Gi", 1 << 30},
		{"0%", "256Mi", 0}, {"12.5%", "1Gi", 128 << 20},
	} {
		got, err := memoryTarget(c.target, c.limit)
		if err != nil || got != c.want {
			t.Errorf("memoryTarget(%q, %q) = %d, %v; want %d", c.target, c.limit, got, err, c.want)
		}
	}
	for _, c := range [][2]string{
		{"-1Mi", ""}, {"lots", ""}, {"64 Mi", ""},
		{"90%", ""}, {"90%", "lots"}, {"90%", "0"}, {"90%", "-1Gi"},
		{"101%", "256Mi"}, {"-5%", "256Mi"}, {"NaN%", "256Mi"}, {"%", "256Mi"}, {"ninety%", "256Mi"}, {"90%%", "256Mi"},
	} {
		if got, err := memoryTarget(c[0], c[1]); err == nil {
			t.Errorf("memoryTarget(%q, %q) accepted: %d", c[0], c[1], got)
		}
	}
}

func TestApplyMemoryTarget(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	debug.SetMemoryLimit(math.MaxInt64)
	applyMemoryTarget(0, false)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("no target changed the limit to %d", got)
	}
	applyMemoryTarget(64<<20, true)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("a target overrode GOMEMLIMIT: %d", got)
	}
	applyMemoryTarget(64<<20, false)
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Errorf("limit %d, want %d", got, 64<<20)
	}
}

func TestApplyGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	applyGCPercent(defaultGCPercent, true)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("--gc-percent overrode GOGC: %d", got)
	}
	applyGCPercent(defaultGCPercent, false)
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GC percent %d, want %d", got, defaultGCPercent)
	}
}
