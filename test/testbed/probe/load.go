package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Bounds of the load mode: it is a test client, never a flood.
const (
	maxRate     = 500
	maxDuration = 10 * time.Minute
)

// loadReport is what `probe load` prints when it ends.
type loadReport struct {
	ops, failed, hits, misses, lost int
	servers                         int
}

func (r loadReport) String() string {
	return fmt.Sprintf("load ops=%d failed=%d hits=%d misses=%d lost=%d servers=%d", r.ops, r.failed, r.hits, r.misses, r.lost, r.servers)
}

// load runs set/get against a fleet the way a memcached client does: it
// resolves the headless Service to every ready pod, hashes each key to one
// server, and keeps one connection per server. Every second operation sets a
// key; the others get a key set earlier (a miss there is a key lost) or, one
// in four, a key never set (a miss by design, so hit ratios are not 1).
// It runs at rate operations per second for d, within maxRate and
// maxDuration, or until stop closes (a test ends its load when the steps it
// covers are done, so it neither waits out a guess nor ends before them),
// and re-resolves the name every second so servers that come and go are
// followed.
func load(name string, port string, rate int, d time.Duration, stop <-chan struct{}) (loadReport, error) {
	if rate <= 0 || rate > maxRate || d <= 0 || d > maxDuration {
		return loadReport{}, fmt.Errorf("rate must be 1..%d/s and duration up to %s", maxRate, maxDuration)
	}
	var (
		rep     loadReport
		servers []string
		conns   = map[string]*mcConn{}
		stored  []string
		seen    = map[string]bool{}
	)
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	resolve := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		if err != nil || len(addrs) == 0 {
			return
		}
		sort.Strings(addrs)
		servers = servers[:0]
		for _, a := range addrs {
			servers = append(servers, net.JoinHostPort(a, port))
			seen[a] = true
		}
	}
	resolve()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	lastResolve := time.Now()
loop:
	for i := 0; time.Now().Before(end); i++ {
		select {
		case <-tick.C:
		case <-stop:
			break loop
		}
		if time.Since(lastResolve) > time.Second {
			resolve()
			lastResolve = time.Now()
		}
		if len(servers) == 0 {
			rep.ops++
			rep.failed++
			continue
		}
		var key string
		set := i%2 == 0
		switch {
		case set:
			key = "load-" + strconv.Itoa(i)
		case i%4 == 3 || len(stored) == 0:
			key = "never-set-" + strconv.Itoa(i)
		default:
			key = stored[(i*7919)%len(stored)]
		}
		addr := serverFor(key, servers)
		c := conns[addr]
		if c == nil {
			var err error
			if c, err = dialMC(addr); err != nil {
				rep.ops++
				rep.failed++
				continue
			}
			conns[addr] = c
		}
		rep.ops++
		var err error
		if set {
			err = c.set(key, "v-"+key)
			if err == nil {
				stored = append(stored, key)
			}
		} else {
			var hit bool
			hit, err = c.get(key)
			switch {
			case err != nil:
			case hit:
				rep.hits++
			default:
				rep.misses++
				if strings.HasPrefix(key, "load-") {
					rep.lost++
				}
			}
		}
		if err != nil {
			rep.failed++
			c.close()
			delete(conns, addr)
		}
	}
	rep.servers = len(seen)
	return rep, nil
}

// serverFor picks a key's server the way memcached clients do, so that a
// server leaving or joining moves only its own share of the keys
// (rendezvous hashing: the server with the highest hash of key and server
// wins). With key modulo server count, as naive clients do, one pod
// replaced would move most keys and the load would count them lost.
func serverFor(key string, servers []string) string {
	var best string
	var bestScore uint64
	for _, s := range servers {
		h := fnv.New64a()
		_, _ = h.Write([]byte(s + "/" + key))
		if score := mix64(h.Sum64()); best == "" || score > bestScore {
			best, bestScore = s, score
		}
	}
	return best
}

// mix64 is splitmix64's finalizer: FNV alone spreads similar strings
// unevenly, which skews which server wins.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

type mcConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialMC(addr string) (*mcConn, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	return &mcConn{c: c, r: bufio.NewReader(c)}, nil
}

func (m *mcConn) close() { _ = m.c.Close() }

func (m *mcConn) set(key, val string) error {
	_ = m.c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintf(m.c, "set %s 0 600 %d\r\n%s\r\n", key, len(val), val); err != nil {
		return err
	}
	line, err := m.r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "STORED" {
		return fmt.Errorf("set %s: %q", key, line)
	}
	return nil
}

func (m *mcConn) get(key string) (bool, error) {
	_ = m.c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintf(m.c, "get %s\r\n", key); err != nil {
		return false, err
	}
	hit := false
	for {
		line, err := m.r.ReadString('\n')
		if err != nil {
			return false, err
		}
		switch line = strings.TrimSpace(line); {
		case line == "END":
			return hit, nil
		case strings.HasPrefix(line, "VALUE "):
			hit = true
			if _, err := m.r.ReadString('\n'); err != nil {
				return false, err
			}
		default:
			return false, errors.New("get: " + line)
		}
	}
}
