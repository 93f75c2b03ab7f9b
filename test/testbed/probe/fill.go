package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// fillValue is the size of each value fill writes: large enough that a
// pod's item memory fills in a few thousand sets.
const fillValue = 64 << 10

// runFill is `probe fill HOST:PORT MIB`: it sets MIB mebibytes of values on
// one server, more than its item memory holds, and prints "fill stored=…
// evictions=…" from memcached's stats afterwards. Bounded by MIB (at most
// 1024) and two minutes.
func runFill(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: probe fill HOST:PORT MIB")
		return 2
	}
	mib, err := strconv.Atoi(args[1])
	if err != nil || mib < 1 || mib > 1024 {
		fmt.Fprintln(os.Stderr, "MIB: 1 to 1024")
		return 2
	}
	stored, evictions, err := fill(args[0], mib, time.Now().Add(2*time.Minute))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("fill stored=%d evictions=%d\n", stored, evictions)
	return 0
}

func fill(addr string, mib int, deadline time.Time) (stored, evictions int, err error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(deadline)
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	value := strings.Repeat("f", fillValue)
	for i := range mib << 20 / fillValue {
		if _, err := fmt.Fprintf(w, "set fill-%d 0 0 %d\r\n%s\r\n", i, len(value), value); err != nil {
			return stored, 0, err
		}
		if err := w.Flush(); err != nil {
			return stored, 0, err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return stored, 0, err
		}
		if line == "STORED\r\n" {
			stored++
		}
	}
	if _, err := fmt.Fprint(w, "stats\r\n"); err != nil {
		return stored, 0, err
	}
	if err := w.Flush(); err != nil {
		return stored, 0, err
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return stored, 0, err
		}
		if line == "END\r\n" {
			return stored, evictions, nil
		}
		if v, ok := strings.CutPrefix(line, "STAT evictions "); ok {
			evictions, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
}
