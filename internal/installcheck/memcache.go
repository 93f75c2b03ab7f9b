package installcheck

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// SetGet stores value under key with memcached's text protocol and reads it
// back, failing unless the same value returns.
func SetGet(rw io.ReadWriter, key, value string) error {
	r := bufio.NewReader(rw)
	if _, err := fmt.Fprintf(rw, "set %s 0 60 %d\r\n%s\r\n", key, len(value), value); err != nil {
		return fmt.Errorf("sending set: %w", err)
	}
	line, err := readLine(r)
	if err != nil {
		return fmt.Errorf("reading set reply: %w", err)
	}
	if line != "STORED" {
		return fmt.Errorf("set replied %q, want STORED", line)
	}

	if _, err := fmt.Fprintf(rw, "get %s\r\n", key); err != nil {
		return fmt.Errorf("sending get: %w", err)
	}
	header, err := readLine(r)
	if err != nil {
		return fmt.Errorf("reading get reply: %w", err)
	}
	var gotKey string
	var flags, size int
	if _, err := fmt.Sscanf(header, "VALUE %s %d %d", &gotKey, &flags, &size); err != nil || gotKey != key {
		return fmt.Errorf("get replied %q, want VALUE %s", header, key)
	}
	// The size is the server's word: only the value's own is worth reading
	// (a negative one would panic, a huge one exhaust memory).
	if size != len(value) {
		return fmt.Errorf("get replied %q: %d bytes, want %d", header, size, len(value))
	}
	data := make([]byte, size+2)
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("reading get value: %w", err)
	}
	if got := string(data[:size]); got != value {
		return fmt.Errorf("get returned %q, want %q", got, value)
	}
	end, err := readLine(r)
	if err != nil {
		return fmt.Errorf("reading end of get reply: %w", err)
	}
	if end != "END" {
		return fmt.Errorf("get ended with %q, want END", end)
	}
	return nil
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}
