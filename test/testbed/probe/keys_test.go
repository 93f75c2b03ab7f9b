package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/example/memcached-operator/test/memcachedbin"
)

// startServers runs the real memcached on one port of 127.0.0.1 and
// 127.0.0.2, as two pods of a fleet whose clients share the port, and
// returns their stop functions.
func startServers(t *testing.T) (port string, stop []func()) {
	t.Helper()
	bin := memcachedbin.Path(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	for _, host := range []string{"127.0.0.1", "127.0.0.2"} {
		args := []string{"-l", host, "-p", port, "-U", "0", "-m", "16"}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "nobody")
		}
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		once := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
		t.Cleanup(once)
		stop = append(stop, once)
		deadline := time.Now().Add(5 * time.Second)
		for {
			c, err := net.Dial("tcp", net.JoinHostPort(host, port))
			if err == nil {
				_ = c.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("memcached on %s:%s: %v", host, port, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return port, stop
}

// flushAll empties one server, as a pod replaced with an empty cache.
func flushAll(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := fmt.Fprint(c, "flush_all\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := c.Read(buf); err != nil || string(buf) != "OK\r\n" {
		t.Fatalf("flush_all: %q %v", buf, err)
	}
}

// TestKeysOnRealMemcached: every key written is read back from the server
// its hash names; a server that lost its cache costs exactly its own keys
// as misses, and one that is down costs them as errors.
func TestKeysOnRealMemcached(t *testing.T) {
	port, stop := startServers(t)
	servers := []string{"127.0.0.1", "127.0.0.2"}
	const n = 2000
	second := 0
	for i := range n {
		if serverFor(keyName(i), servers) == servers[1] {
			second++
		}
	}
	if second < n/3 || second > 2*n/3 {
		t.Fatalf("the second server holds %d of %d keys: the hash does not spread", second, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	check := func(write bool, wantHits, wantErrs int) {
		t.Helper()
		if hits, errs := keysRun(write, servers, port, n, deadline); hits != wantHits || errs != wantErrs {
			t.Fatalf("write=%v: %d hits, %d errors; want %d and %d", write, hits, errs, wantHits, wantErrs)
		}
	}
	check(true, n, 0)
	check(false, n, 0)
	flushAll(t, net.JoinHostPort(servers[1], port))
	check(false, n-second, 0)
	stop[1]()
	check(false, n-second, second)
}

// TestKeysArguments: bad input is refused with the usage, before any
// connection.
func TestKeysArguments(t *testing.T) {
	for _, args := range [][]string{
		{}, {"write", "a", "11211"}, {"delete", "a", "11211", "10"},
		{"read", "a", "11211", "0"}, {"read", "a", "11211", "x"}, {"read", "a", "11211", "1000001"},
	} {
		if code := runKeys(args); code != 2 {
			t.Errorf("runKeys(%q) = %d, want 2", args, code)
		}
	}
}
