package main

import (
	"strconv"
	"testing"
	"time"
)

// TestServerForMovesOnlyTheLostServersKeys: when one server of three goes,
// the keys of the other two stay where they were, and the lost server's
// keys spread over the rest; each server holds about a third.
func TestServerForMovesOnlyTheLostServersKeys(t *testing.T) {
	three := []string{"10.244.1.5:11211", "10.244.2.7:11211", "10.244.3.9:11211"}
	two := three[:2]
	const n = 30000
	count := map[string]int{}
	for i := range n {
		key := "load-" + strconv.Itoa(i)
		before := serverFor(key, three)
		count[before]++
		after := serverFor(key, two)
		if before != three[2] && after != before {
			t.Fatalf("key %s moved from %s to %s although its server stayed", key, before, after)
		}
	}
	for _, s := range three {
		if c := count[s]; c < n/3-n/20 || c > n/3+n/20 {
			t.Errorf("server %s holds %d of %d keys, not about a third", s, c, n)
		}
	}
	if serverFor("k", nil) != "" {
		t.Error("a server chosen among none")
	}
}

// A test ends its load when the steps it covers are done: the report comes
// at once, long before the duration it was started with.
func TestLoadEndsWhenStopped(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan loadReport)
	go func() {
		// Nothing listens there: every operation fails, which is still load.
		rep, err := load("127.0.0.1", "1", 50, maxDuration, stop)
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	close(stop)
	select {
	case rep := <-done:
		if rep.ops != rep.failed {
			t.Fatalf("operations against a closed port succeeded: %v", rep)
		}
	case <-time.After(time.Minute):
		t.Fatal("load ignored its stop")
	}
	if stopLoad("0x") == 0 || stopLoad("999999999") == 0 {
		t.Fatal("stop reported success without a load to stop")
	}
}
