package authreload

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/example/memcached-operator/internal/exporter"
)

// CertRefresher keeps a running memcached's TLS certificate equal to its
// mounted files. memcached reads the certificate and key (-o ssl_chain_cert,
// ssl_key) at start and again on the text command refresh_certs; when
// cert-manager renews the certificate the kubelet swaps the Secret volume's
// files in place. Sending refresh_certs after each change serves the new
// certificate to new connections without a restart, so the cache stays.
type CertRefresher struct {
	// Files are the certificate and key as mounted; a change to any of them
	// is a renewal.
	Files []string
	// Address is memcached's listener without TLS on the pod's loopback:
	// the refresher then needs no TLS client and no certificate.
	Address string
	// AuthFile, when set, is memcached's auth file (-Y): every command,
	// refresh_certs included, is refused until the connection logs in.
	AuthFile string
	// Interval between two reads of Files.
	Interval time.Duration
	// Timeout bounds one refresh: connect, log in, command, answer.
	Timeout time.Duration
	// Log says what was done.
	Log *slog.Logger
}

// Run reads Files every Interval until ctx ends, and sends refresh_certs once
// at start and then after each change of their content. The refresh at start
// closes the gap between memcached reading the files and this first reading
// them. A refresh that fails (memcached not listening yet) stays due and is
// retried on the next tick.
func (c *CertRefresher) Run(ctx context.Context) error {
	last, err := digestAll(c.Files)
	if err != nil {
		// The kubelet mounts the files before the containers start.
		return err
	}
	c.Log.Info("Watching the TLS certificate", "files", c.Files, "interval", c.Interval.String(), "sha256", short(last))
	due, reason, lastErr := true, "start", ""
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	for {
		if cur, err := digestAll(c.Files); err != nil {
			c.Log.Info("Could not read the TLS files; trying again", "error", err.Error())
		} else if string(cur) != string(last) {
			last, due, reason = cur, true, "changed"
		}
		if due {
			switch err := c.Refresh(); {
			case err != nil && err.Error() != lastErr:
				lastErr = err.Error()
				c.Log.Info("Could not make memcached reload its certificate yet; trying again", "reason", reason, "error", lastErr)
			case err == nil:
				c.Log.Info("memcached reloaded its certificate", "reason", reason, "sha256", short(last))
				due, lastErr = false, ""
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh sends refresh_certs to memcached once, logged in first when
// AuthFile is set, and fails unless memcached answers OK: it answers an
// ERROR line when the files do not load, and keeps the certificate it had.
func (c *CertRefresher) Refresh() error {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	conn, err := net.DialTimeout("tcp", c.Address, timeout)
	if err != nil {
		return fmt.Errorf("connecting to memcached: %w", err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	rw := bufio.NewReadWriter(bufio.NewReaderSize(conn, maxAnswer), bufio.NewWriter(conn))
	if c.AuthFile != "" {
		creds, err := exporter.ReadAuthFile(c.AuthFile)
		if err != nil {
			return err
		}
		if err := exporter.Authenticate(rw, creds); err != nil {
			return err
		}
	}
	if _, err := rw.WriteString("refresh_certs\r\n"); err != nil {
		return fmt.Errorf("sending refresh_certs: %w", err)
	}
	if err := rw.Flush(); err != nil {
		return fmt.Errorf("sending refresh_certs: %w", err)
	}
	return refreshAnswer(rw.Reader)
}

// maxAnswer bounds the line read back from memcached: its answers to
// refresh_certs are one short line.
const maxAnswer = 512

// refreshAnswer reads memcached's answer to refresh_certs: OK, or the error
// it gives, cut to maxAnswer bytes.
func refreshAnswer(r *bufio.Reader) error {
	line, err := r.ReadSlice('\n')
	if len(line) > maxAnswer {
		line = line[:maxAnswer]
	}
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return fmt.Errorf("memcached answered refresh_certs with a line longer than %d bytes: %q", maxAnswer, line)
	case err != nil:
		return fmt.Errorf("reading the answer to refresh_certs: %w", err)
	}
	if s := strings.TrimRight(string(line), "\r\n"); s != "OK" {
		return errors.New("memcached did not reload its certificate: " + strings.ToValidUTF8(s, "?"))
	}
	return nil
}

func digestAll(files []string) ([]byte, error) {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		h.Write(sum[:])
	}
	return h.Sum(nil), nil
}
