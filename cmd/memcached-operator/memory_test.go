package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestMemoryTarget(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "0": 0, "64Mi": 64 << 20, "67108864": 64 << 20, "100M": 100e6} {
		got, err := memoryTarget(in)
		if err != nil || got != want {
			t.Errorf("memoryTarget(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"-1Mi", "lots", "64 Mi"} {
		if _, err := memoryTarget(in); err == nil {
			t.Errorf("memoryTarget(%q) accepted", in)
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
