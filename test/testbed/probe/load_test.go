package main

import (
	"strconv"
	"testing"
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
