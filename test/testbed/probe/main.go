// Command probe is the testbed's in-cluster test client and server: the
// cluster has no busybox (nothing can be pulled), so the smoke tests run this
// static binary in pods (image localhost/testbed-probe, test/testbed/images.sh).
//
//	probe serve ADDR            HTTP server answering its hostname
//	probe http URL              GET URL, print the body, fail on non-200
//	probe status URL            GET URL without credentials, print its status code
//	probe dns NAME              resolve NAME through /etc/resolv.conf
//	probe memcached HOST:PORT   set a key and get it back
//	probe reach HOST:PORT TIMEOUT
//	                            memcached set/get once, within TIMEOUT: exit 0
//	                            and "memcached set/get ok: ...", or exit 1 and
//	                            "unreachable: <error>", each followed by
//	                            "; dialled <RFC 3339 time> took <duration>"
//	                            (for `kubectl exec`: a refusal is an answer,
//	                            not to be retried; the pod shares the test's
//	                            clock, so the dial time places the attempt)
//	probe connect HOST:PORT TIMEOUT
//	                            reach for any TCP server: "connected" when a
//	                            connection is accepted within TIMEOUT
//	probe memcached-auth HOST:PORT USER PASS
//	                            log in (ASCII authentication), then set and get;
//	                            prints the time it first succeeded
//	probe memcached-answer HOST:PORT [USER PASS]
//	                            print memcached's answer to a get sent without
//	                            logging in, or to the login with USER PASS;
//	                            a refusal is an answer, not a failure
//	probe memcached-tls HOST:PORT CAFILE SERVERNAME [NOT_SERIAL]
//	                            set and get over TLS, verifying the server
//	                            against CAFILE for SERVERNAME; prints the
//	                            served certificate's serial and the handshake
//	                            time; with NOT_SERIAL, retries while that
//	                            serial is still served (a renewal)
//	probe memcached-plain-refused HOST:PORT
//	                            a plain-text client gets no answer (TLS port)
//	probe memcached-latency HOST:PORT ROUNDS [CAFILE SERVERNAME]
//	                            connect (and handshake) 20 times, then ROUNDS
//	                            set/get on one connection; prints p50 and p99
//	probe load NAME PORT RATE DURATION
//	                            set/get against every address NAME resolves to,
//	                            RATE ops/s for DURATION; prints the counts
//
// Client modes retry for up to 60 s, or PROBE_DEADLINE (a Go duration), as
// a Service's endpoints and rules appear moments after its pods are Ready,
// and exit non-zero when they never succeed.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: probe serve|http|status|dns|srv|memcached ARG, probe reach|connect HOST:PORT TIMEOUT, probe load NAME PORT RATE DURATION, probe keys write|read SERVERS PORT COUNT, probe fill HOST:PORT MIB, probe stop PID")
		os.Exit(2)
	}
	mode, arg := os.Args[1], os.Args[2]
	if mode == "load" {
		os.Exit(runLoad(os.Args[2:]))
	}
	if mode == "keys" {
		os.Exit(runKeys(os.Args[2:]))
	}
	if mode == "fill" {
		os.Exit(runFill(os.Args[2:]))
	}
	if mode == "stop" {
		os.Exit(stopLoad(arg))
	}
	if mode == "reach" {
		os.Exit(reach(os.Args[2:], memcached))
	}
	if mode == "connect" {
		os.Exit(reach(os.Args[2:], connect))
	}
	if mode == "serve" {
		host, _ := os.Hostname()
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, host) })
		srv := &http.Server{Addr: arg, ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintln(os.Stderr, srv.ListenAndServe())
		os.Exit(1)
	}
	var check func() (string, error)
	switch mode {
	case "http":
		check = func() (string, error) { return get(arg) }
	case "status":
		check = func() (string, error) { return status(arg) }
	case "dns":
		check = func() (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			addrs, err := net.DefaultResolver.LookupHost(ctx, arg)
			return strings.Join(addrs, " "), err
		}
	case "srv":
		// probe srv NAME: the _memcached._tcp SRV records of NAME, one
		// "target:port" a line.
		check = func() (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, records, err := net.DefaultResolver.LookupSRV(ctx, "memcached", "tcp", arg)
			var lines []string
			for _, r := range records {
				lines = append(lines, fmt.Sprintf("%s:%d", r.Target, r.Port))
			}
			return strings.Join(lines, "\n"), err
		}
	case "memcached":
		check = func() (string, error) { return memcached(arg, 5*time.Second) }
	case "memcached-auth":
		if len(os.Args) != 5 {
			fmt.Fprintln(os.Stderr, "usage: probe memcached-auth HOST:PORT USER PASS")
			os.Exit(2)
		}
		check = func() (string, error) { return memcachedAuth(arg, os.Args[3], os.Args[4]) }
	case "memcached-answer":
		check = func() (string, error) { return memcachedAnswer(arg, os.Args[3:]) }
	case "memcached-tls":
		check = func() (string, error) { return memcachedTLS(os.Args[2:]) }
	case "memcached-plain-refused":
		check = func() (string, error) { return memcachedPlainRefused(arg) }
	case "memcached-latency":
		check = func() (string, error) { return memcachedLatency(os.Args[2:]) }
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
	wait := 60 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PROBE_DEADLINE")); err == nil {
		wait = d
	}
	deadline := time.Now().Add(wait)
	for {
		out, err := check()
		if err == nil {
			fmt.Println(out)
			return
		}
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", mode, arg, err)
		if time.Now().After(deadline) {
			os.Exit(1)
		}
		time.Sleep(time.Second)
	}
}

func get(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	return strings.TrimSpace(string(b)), nil
}

// status GETs url without credentials and reports the answer's status code,
// whatever it is: a refusal (401, 403) is the answer some specs wait for. The
// server's certificate is not checked: the question is who may read, not who
// serves.
func status(url string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	_ = resp.Body.Close()
	return fmt.Sprintf("status %d", resp.StatusCode), nil
}

// reach parses `reach|connect HOST:PORT TIMEOUT` and makes one attempt.
func reach(args []string, try func(addr string, timeout time.Duration) (string, error)) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: probe reach HOST:PORT TIMEOUT")
		return 2
	}
	timeout, err := time.ParseDuration(args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "reach: bad TIMEOUT:", err)
		return 2
	}
	start := time.Now()
	out, err := try(args[0], timeout)
	when := fmt.Sprintf("; dialled %s took %s", start.UTC().Format(time.RFC3339Nano), time.Since(start))
	if err != nil {
		fmt.Printf("unreachable: %v%s\n", err, when)
		return 1
	}
	fmt.Println(out + when)
	return 0
}

// connect opens a TCP connection and closes it: the policy let it through.
func connect(addr string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	_ = conn.Close()
	return "connected to " + addr, nil
}

// memcached stores a value with the text protocol and reads it back, all
// within timeout.
func memcached(addr string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(deadline)
	return setGet(conn, bufio.NewReader(conn))
}

// login sends memcached's ASCII authentication (a set whose data is "USER
// PASS") and returns the answer line.
func login(conn net.Conn, r *bufio.Reader, user, pass string) (string, error) {
	token := user + " " + pass
	if _, err := fmt.Fprintf(conn, "set auth 0 0 %d\r\n%s\r\n", len(token), token); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	return strings.TrimSpace(line), err
}

// memcachedAuth logs in, then stores a value and reads it back.
func memcachedAuth(addr, user, pass string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	answer, err := login(conn, r, user, pass)
	if err != nil {
		return "", err
	}
	if answer != "STORED" {
		return "", fmt.Errorf("login as %s: %q", user, answer)
	}
	out, err := setGet(conn, r)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (authenticated as %s) at %s", out, user, time.Now().UTC().Format(time.RFC3339Nano)), nil
}

// memcachedAnswer is what memcached answers to a get without logging in,
// or to a login with the given credentials.
func memcachedAnswer(addr string, creds []string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	if len(creds) == 2 {
		answer, err := login(conn, r, creds[0], creds[1])
		return "login answer: " + answer, err
	}
	if _, err := fmt.Fprint(conn, "get smoke\r\n"); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	return "get answer: " + strings.TrimSpace(line), err
}

// setGet stores a value and reads it back on an open connection.
func setGet(conn net.Conn, r *bufio.Reader) (string, error) {
	host, _ := os.Hostname()
	// A key of this pod's own: clients trying one server at once must not
	// read each other's value.
	key, val := "smoke-"+host, "hello-from-"+host
	if _, err := fmt.Fprintf(conn, "set %s 0 60 %d\r\n%s\r\n", key, len(val), val); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(line) != "STORED" {
		return "", fmt.Errorf("set: %q", line)
	}
	if _, err := fmt.Fprintf(conn, "get %s\r\n", key); err != nil {
		return "", err
	}
	var got []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimSpace(line)
		if line == "END" {
			break
		}
		got = append(got, line)
	}
	if len(got) != 2 || got[1] != val {
		return "", fmt.Errorf("get: %q", got)
	}
	return "memcached set/get ok: " + got[1], nil
}

// runLoad parses `load NAME PORT RATE DURATION`, runs it and prints the report.
func runLoad(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: probe load NAME PORT RATE DURATION")
		return 2
	}
	rate, err1 := strconv.Atoi(args[2])
	d, err2 := time.ParseDuration(args[3])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "load: bad RATE or DURATION:", err1, err2)
		return 2
	}
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() { <-sig; close(stop) }()
	rep, err := load(args[0], args[1], rate, d, stop)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 2
	}
	fmt.Println(rep)
	return 0
}

// stopLoad ends a running `probe load` early (SIGUSR1): run in the load's
// container with `kubectl exec POD -- /probe stop 1`, where the load is PID 1.
// It fails when no such process can be signalled. The load may exit, and its
// container with it, before this returns: a caller checks that the load
// ended, not this command's exit status.
func stopLoad(arg string) int {
	pid, err := strconv.Atoi(arg)
	if err == nil {
		err = syscall.Kill(pid, syscall.SIGUSR1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		return 1
	}
	return 0
}
