package main

import (
	"net"
	"testing"
	"time"
)

// TestFillEvicts: filling a real memcached with more than its item memory
// stores every value and makes it evict, which the report shows.
func TestFillEvicts(t *testing.T) {
	port, _ := startServers(t) // -m 16
	stored, evictions, err := fill(net.JoinHostPort("127.0.0.1", port), 24, time.Now().Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if stored != 24<<20/fillValue || evictions == 0 {
		t.Fatalf("stored %d, evictions %d: want every value stored and some evicted", stored, evictions)
	}
	if code := runFill([]string{"127.0.0.1:1", "2000"}); code != 2 {
		t.Fatalf("2000 MiB accepted: %d", code)
	}
}
