package main

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
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
	applyGCPercent(defaultGCPercent, true)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("--gc-percent overrode GOGC: %d", got)
	}
	applyGCPercent(defaultGCPercent, false)
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("GC percent %d, want %d", got, defaultGCPercent)
	}
}

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live, peak uint64
		percent    int
		want       int
	}{
		// At the peak, or before any collection, the flag's growth.
		{37, 37, 50, 50}, {0, 0, 50, 50}, {0, 37, 50, 50},
		// Below it, the room the peak took: 37 × 1.5 = 55.5 past 28 live.
		{28, 37, 50, 98},
		// Never more than Go's default past what is live.
		{18, 37, 50, 100}, {1, 1 << 30, 50, 100},
		// Never less than the flag's, whatever the flag.
		{36, 37, 50, 54}, {30, 37, 20, 48}, {50, 37, 50, 50},
	} {
		if got := gcPercentFor(c.live, c.peak, c.percent); got != c.want {
			t.Errorf("gcPercentFor(%d, %d, %d) = %d, want %d", c.live, c.peak, c.percent, got, c.want)
		}
	}
}

// held is live across a collection while the test holds it.
var held []byte

// After the live heap falls from its peak, the tuner lets the heap fill the
// room the peak took; while it is at its peak, the flag's growth holds.
func TestGCTunerRaisesTheGrowthBelowThePeak(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(defaultGCPercent))
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	read := func() int { metrics.Read(gogc); return int(gogc[0].Value.Uint64()) }

	held = make([]byte, 64<<20)
	runtime.GC()
	tuner := newGCTuner(defaultGCPercent)
	runtime.GC()
	tuner.observe()
	if got := read(); got != defaultGCPercent {
		t.Fatalf("at the peak the growth is %d, want %d", got, defaultGCPercent)
	}
	held = nil
	runtime.GC()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go tuner.run(ctx, 5*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for read() != maxGCPercent {
		if time.Now().After(deadline) {
			t.Fatalf("the growth stayed %d with the live heap far below its peak", read())
		}
		runtime.Gosched()
	}
}
