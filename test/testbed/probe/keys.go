package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runKeys is `probe keys write|read SERVERS PORT COUNT`: it sets COUNT
// keys, or reads them back and counts those still there, each on the
// server rendezvous hashing gives it, as a client configured with a static
// server list does. SERVERS is a comma-separated list of host names (a
// StatefulSet fleet's stable names), or one name that resolves to the
// servers (a Deployment fleet's Service: its pods' addresses). It prints
// "keys mode=… count=… hits=… errors=…". Bounded by COUNT and a minute.
func runKeys(args []string) int {
	if len(args) != 4 || (args[0] != "write" && args[0] != "read") {
		fmt.Fprintln(os.Stderr, "usage: probe keys write|read SERVERS PORT COUNT")
		return 2
	}
	count, err := strconv.Atoi(args[3])
	if err != nil || count < 1 || count > 1_000_000 {
		fmt.Fprintln(os.Stderr, "COUNT: 1 to 1000000")
		return 2
	}
	servers, err := keyServers(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hits, errs := keysRun(args[0] == "write", servers, args[2], count, time.Now().Add(time.Minute))
	fmt.Printf("keys mode=%s count=%d hits=%d errors=%d servers=%d\n", args[0], count, hits, errs, len(servers))
	return 0
}

func keyServers(arg string) ([]string, error) {
	if strings.Contains(arg, ",") {
		return strings.Split(arg, ","), nil
	}
	addrs, err := net.LookupHost(arg)
	if err != nil {
		return nil, err
	}
	slices.Sort(addrs)
	return addrs, nil
}

// keysRun writes or reads every key over one connection per server,
// pipelined in batches. A server that cannot be reached counts its keys as
// errors.
func keysRun(write bool, servers []string, port string, count int, deadline time.Time) (hits, errs int) {
	byServer := map[string][]int{}
	for i := range count {
		s := serverFor(keyName(i), servers)
		byServer[s] = append(byServer[s], i)
	}
	for s, keys := range byServer {
		h, e := keysOn(write, net.JoinHostPort(s, port), keys, deadline)
		hits, errs = hits+h, errs+e
	}
	return hits, errs
}

func keyName(i int) string { return "kept-" + strconv.Itoa(i) }

func keysOn(write bool, addr string, keys []int, deadline time.Time) (hits, errs int) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, len(keys)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(deadline)
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	const batch = 100
	for start := 0; start < len(keys); start += batch {
		part := keys[start:min(start+batch, len(keys))]
		for _, i := range part {
			if write {
				v := "v" + strconv.Itoa(i)
				_, _ = fmt.Fprintf(w, "set %s 0 0 %d\r\n%s\r\n", keyName(i), len(v), v)
			} else {
				_, _ = fmt.Fprintf(w, "get %s\r\n", keyName(i))
			}
		}
		if w.Flush() != nil {
			return hits, errs + len(keys) - start
		}
		for _, i := range part {
			line, err := r.ReadString('\n')
			switch {
			case err != nil:
				return hits, errs + len(keys) - start
			case write && line == "STORED\r\n":
				hits++
			case write:
				errs++
			case strings.HasPrefix(line, "VALUE "):
				value, _ := r.ReadString('\n')
				end, _ := r.ReadString('\n')
				if value == "v"+strconv.Itoa(i)+"\r\n" && end == "END\r\n" {
					hits++
				}
			case line != "END\r\n":
				errs++
			}
		}
	}
	return hits, errs
}
