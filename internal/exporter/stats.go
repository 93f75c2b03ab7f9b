// Package exporter reads a memcached server's statistics over its text
// protocol and serves them as Prometheus metrics under the names, labels and
// port (9150) of the upstream prometheus/memcached_exporter, so its
// dashboards and alerts work unchanged. Each scrape opens one connection,
// bounded by a deadline, and closes it before the scrape returns.
package exporter

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Limits on what one scrape reads, so a server that answers garbage, or
// endlessly, cannot make the exporter grow.
const (
	maxLineBytes = 4096
	maxLines     = 4096
)

// Stats are the answers of one scrape, as memcached printed them: `stats`
// and `stats settings` as name → value; `stats slabs` and `stats items` per
// slab class as class → name → value, and the totals of `stats slabs`.
type Stats struct {
	Stats      map[string]string
	Settings   map[string]string
	Slabs      map[string]map[string]string
	SlabTotals map[string]string
}

// Fetch connects to addr, logs in with creds unless nil, asks for `stats`,
// `stats settings`, `stats slabs` and `stats items`, and closes the
// connection. The whole exchange must finish within timeout.
func Fetch(ctx context.Context, addr string, timeout time.Duration, creds *Credentials) (*Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to memcached at %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	rw := bufio.NewReadWriter(bufio.NewReaderSize(conn, maxLineBytes), bufio.NewWriter(conn))
	if creds != nil {
		if err := Authenticate(rw, *creds); err != nil {
			return nil, err
		}
	}
	return read(rw)
}

// read asks for the four kinds of statistics on one connection and reads
// the answers, bounded by maxLineBytes and maxLines each: what the server
// says is untrusted.
func read(rw *bufio.ReadWriter) (*Stats, error) {
	stats, err := command(rw, "stats")
	if err != nil {
		return nil, err
	}
	settings, err := command(rw, "stats settings")
	if err != nil {
		return nil, err
	}
	out := &Stats{Stats: stats, Settings: settings, Slabs: map[string]map[string]string{}, SlabTotals: map[string]string{}}
	slabs, err := command(rw, "stats slabs")
	if err != nil {
		return nil, err
	}
	items, err := command(rw, "stats items")
	if err != nil {
		return nil, err
	}
	for name, value := range items {
		// items:<class>:<name>
		if rest, ok := strings.CutPrefix(name, "items:"); ok {
			slabs[rest] = value
		}
	}
	for name, value := range slabs {
		class, stat, ok := strings.Cut(name, ":")
		if !ok {
			out.SlabTotals[name] = value
			continue
		}
		if out.Slabs[class] == nil {
			out.Slabs[class] = map[string]string{}
		}
		out.Slabs[class][stat] = value
	}
	return out, nil
}

// command sends one stats command and reads its STAT lines up to END.
func command(rw *bufio.ReadWriter, cmd string) (map[string]string, error) {
	if _, err := rw.WriteString(cmd + "\r\n"); err != nil {
		return nil, fmt.Errorf("sending %q: %w", cmd, err)
	}
	if err := rw.Flush(); err != nil {
		return nil, fmt.Errorf("sending %q: %w", cmd, err)
	}
	out := map[string]string{}
	for range maxLines {
		line, err := readLine(rw.Reader)
		if err != nil {
			return nil, fmt.Errorf("reading the answer to %q: %w", cmd, err)
		}
		switch {
		case line == "END":
			return out, nil
		case strings.HasPrefix(line, "STAT "):
			name, value, ok := strings.Cut(line[len("STAT "):], " ")
			if !ok || name == "" {
				return nil, fmt.Errorf("answer to %q has a malformed line %q", cmd, line)
			}
			out[name] = value
		default:
			// ERROR, CLIENT_ERROR, SERVER_ERROR, or something that is not memcached.
			return nil, fmt.Errorf("unexpected answer to %q: %q", cmd, line)
		}
	}
	return nil, fmt.Errorf("answer to %q has more than %d lines", cmd, maxLines)
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("line longer than %d bytes", maxLineBytes)
	}
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}
