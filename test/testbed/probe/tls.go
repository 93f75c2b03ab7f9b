package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// tlsConfig verifies the server against the PEM CA file for serverName.
func tlsConfig(caFile, serverName string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}

// dialTLS connects and completes the handshake, verifying the certificate,
// and returns the connection and how long the handshake took.
func dialTLS(addr string, cfg *tls.Config) (*tls.Conn, time.Duration, error) {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, 0, err
	}
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	conn := tls.Client(raw, cfg)
	start := time.Now()
	if err := conn.Handshake(); err != nil {
		_ = raw.Close()
		return nil, 0, err
	}
	return conn, time.Since(start), nil
}

func serial(conn *tls.Conn) string {
	return fmt.Sprintf("%x", conn.ConnectionState().PeerCertificates[0].SerialNumber)
}

// memcachedTLS is `memcached-tls HOST:PORT CAFILE SERVERNAME [NOT_SERIAL]`:
// a verified TLS connection, a set and a get over it, and the serial of the
// certificate served. With NOT_SERIAL it fails (and is retried) while the
// server still serves that serial: it waits for a renewal, and prints the
// time it saw the new one.
func memcachedTLS(args []string) (string, error) {
	if len(args) < 3 {
		return "", errors.New("usage: probe memcached-tls HOST:PORT CAFILE SERVERNAME [NOT_SERIAL]")
	}
	cfg, err := tlsConfig(args[1], args[2])
	if err != nil {
		return "", err
	}
	conn, took, err := dialTLS(args[0], cfg)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	s := serial(conn)
	if len(args) > 3 && s == args[3] {
		return "", fmt.Errorf("still serving serial %s", s)
	}
	out, err := setGet(conn, bufio.NewReader(conn))
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("tls %s; serial=%s handshake=%s tls=%s at %s", out, s, took, tlsVersion(conn), time.Now().UTC().Format(time.RFC3339Nano)), nil
}

func tlsVersion(conn *tls.Conn) string {
	return tls.VersionName(conn.ConnectionState().Version)
}

// memcachedPlainRefused is `memcached-plain-refused HOST:PORT`: a plain-text
// client's version command gets no memcached answer (a TLS listener closes
// the connection on a non-handshake). An answer is the failure.
func memcachedPlainRefused(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprint(conn, "version\r\n"); err != nil {
		return "refused: " + err.Error(), nil
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if strings.HasPrefix(line, "VERSION") {
		return "", fmt.Errorf("a plain-text client was answered: %q", line)
	}
	return fmt.Sprintf("refused: no answer (%v, read %q)", err, line), nil
}

// memcachedLatency is `memcached-latency HOST:PORT ROUNDS [CAFILE
// SERVERNAME]`: 20 fresh connections (TCP connect, plus the handshake with
// TLS), then ROUNDS set/get round trips on one connection; it prints the
// medians and the 99th percentile.
func memcachedLatency(args []string) (string, error) {
	if len(args) != 2 && len(args) != 4 {
		return "", errors.New("usage: probe memcached-latency HOST:PORT ROUNDS [CAFILE SERVERNAME]")
	}
	var rounds int
	if _, err := fmt.Sscan(args[1], &rounds); err != nil || rounds < 1 || rounds > 10000 {
		return "", fmt.Errorf("bad ROUNDS %q", args[1])
	}
	var cfg *tls.Config
	if len(args) == 4 {
		var err error
		if cfg, err = tlsConfig(args[2], args[3]); err != nil {
			return "", err
		}
	}
	open := func() (net.Conn, time.Duration, error) {
		if cfg != nil {
			start := time.Now()
			c, _, err := dialTLS(args[0], cfg)
			return c, time.Since(start), err
		}
		start := time.Now()
		c, err := net.DialTimeout("tcp", args[0], 5*time.Second)
		return c, time.Since(start), err
	}
	var connects []time.Duration
	for range 20 {
		c, took, err := open()
		if err != nil {
			return "", err
		}
		_ = c.Close()
		connects = append(connects, took)
	}
	conn, _, err := open()
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(conn)
	var rtts []time.Duration
	for range rounds {
		start := time.Now()
		if _, err := setGet(conn, r); err != nil {
			return "", err
		}
		rtts = append(rtts, time.Since(start))
	}
	mode := "plain"
	if cfg != nil {
		mode = "tls"
	}
	return fmt.Sprintf("%s connect_p50=%s set+get_p50=%s set+get_p99=%s rounds=%d", mode, pct(connects, 50), pct(rtts, 50), pct(rtts, 99), rounds), nil
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))].Round(time.Microsecond)
}
