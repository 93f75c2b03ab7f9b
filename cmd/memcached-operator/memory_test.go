package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
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
	applyGCPercent(defaultGCPercent, 0, true)()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("--gc-percent overrode GOGC: %d", got)
	}
	applyGCPercent(defaultGCPercent, 0, false)()
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GC percent %d, want %d", got, defaultGCPercent)
	}
}

func TestGCPercentFor(t *testing.T) {
	const mi = 1 << 20
	for _, c := range []struct {
		live     uint64
		percent  int
		headroom int64
		want     int
	}{
		{6 * mi, 50, 0, 50},            // no headroom asked
		{40 * mi, 50, 16 * mi, 50},     // half of a large heap is more
		{32 * mi, 50, 16 * mi, 50},     // exactly enough
		{6 * mi, 50, 16 * mi, 267},     // 16 MiB past 6, rounded up
		{16 * mi, 400, 16 * mi, 400},   // a higher --gc-percent is kept
		{1, 50, 16 * mi, maxGCPercent}, // a tiny heap is bounded
		{0, 50, 16 * mi, maxGCPercent},
	} {
		if got := gcPercentFor(c.live, c.percent, c.headroom); got != c.want {
			t.Errorf("gcPercentFor(%d, %d, %d) = %d, want %d", c.live, c.percent, c.headroom, got, c.want)
		}
		if got := gcPercentFor(c.live, c.percent, c.headroom); c.headroom > 0 && c.live > 0 && got < maxGCPercent &&
			c.live*uint64(got)/100 < uint64(c.headroom) {
			t.Errorf("gcPercentFor(%d, %d, %d) = %d leaves less than the headroom", c.live, c.percent, c.headroom, got)
		}
	}
}

// gogc reads the collector's growth percent without setting it.
func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func TestHeadroomRaisesGrowthAfterACollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	// A test binary's live heap is well under a GiB: 50 % of it is less.
	stop := applyGCPercent(50, 1<<30, false)
	defer stop()
	if got := gogc(); got != 50 {
		t.Fatalf("growth %d before any collection, want 50", got)
	}
	collected(t)
	if got := gogc(); got <= 50 {
		t.Fatalf("growth %d after a collection, want it raised for the headroom", got)
	}
}

func TestAfterEachGCStops(t *testing.T) {
	var calls atomic.Int32
	stop := afterEachGC(func() { calls.Add(1) })
	collected(t)
	if calls.Load() == 0 {
		t.Fatal("not called after a collection")
	}
	stop()
	n := calls.Load()
	collected(t)
	collected(t)
	if got := calls.Load(); got != n {
		t.Errorf("called %d times after stop", got-n)
	}
}

// collected returns once a collection has run and the finalizers it queued
// have: they run one at a time, so the one set here runs after those queued
// before it.
func collected(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) { close(done) })
	deadline := time.After(30 * time.Second)
	for {
		runtime.GC()
		select {
		case <-done:
			return
		case <-deadline:
			t.Fatal("no collection ran the finalizers")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
