package launcher

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The copy speaks memcached's text protocol to the two private memcacheds:
// lru_crawler metadump for the keys, meta get and quiet meta set for the
// items.

// copyItems copies every live item of the memcached on from into the one
// on to, with its flags and remaining time to live, in batches: a metadump
// streams the keys on one connection, a second reads each batch's values
// and a third writes them, quietly but for errors. It stops when the room
// the volume has left (room, before each batch) would not hold the next
// item.
func copyItems(from, to string, room func() (int64, error)) (Migration, error) {
	var m Migration
	dump, err := net.Dial("unix", from)
	if err != nil {
		return m, err
	}
	defer func() { _ = dump.Close() }()
	get, err := dialRW(from)
	if err != nil {
		return m, err
	}
	defer func() { _ = get.c.Close() }()
	set, err := dialRW(to)
	if err != nil {
		return m, err
	}
	defer func() { _ = set.c.Close() }()

	keys := bufio.NewReader(dump)
	for {
		_ = dump.SetDeadline(time.Now().Add(copyIdle))
		if _, err := dump.Write([]byte("lru_crawler metadump all\r\n")); err != nil {
			return m, err
		}
		line, err := keys.ReadString('\n')
		if err != nil {
			return m, err
		}
		// A crawl of memcached's own (its LRU crawler starts one at boot)
		// makes it answer BUSY until done.
		if !strings.HasPrefix(line, "BUSY") {
			batch, done, err := addKey(nil, line)
			if err != nil {
				return m, err
			}
			for !done {
				if len(batch) == copyBatch {
					if err := copyBatchOf(get, set, batch, room, &m); err != nil || m.Full {
						return m, err
					}
					batch = batch[:0]
				}
				_ = dump.SetDeadline(time.Now().Add(copyIdle))
				if line, err = keys.ReadString('\n'); err != nil {
					return m, err
				}
				if batch, done, err = addKey(batch, line); err != nil {
					return m, err
				}
			}
			return m, copyBatchOf(get, set, batch, room, &m)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// addKey adds the key of one metadump line to batch; done at its END.
func addKey(batch []string, line string) ([]string, bool, error) {
	line = strings.TrimRight(line, "\r\n")
	if line == "END" {
		return batch, true, nil
	}
	enc, ok := strings.CutPrefix(line, "key=")
	if !ok {
		return batch, false, fmt.Errorf("memcached's metadump said %q", line)
	}
	enc, _, _ = strings.Cut(enc, " ")
	key, err := url.PathUnescape(enc)
	if err != nil {
		return batch, false, fmt.Errorf("a metadump key %q: %w", enc, err)
	}
	return append(batch, key), false, nil
}

type rw struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dialRW(sock string) (*rw, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	return &rw{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// metaKey is a key as the meta commands take it: as is when it is a word
// of the text protocol, else base64 with the b flag (a key stored through
// the binary protocol may hold any byte).
func metaKey(key string) (string, string) {
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] >= 0x7f {
			return base64.StdEncoding.EncodeToString([]byte(key)), " b"
		}
	}
	return key, ""
}

// copyBatchOf reads a batch's values (mg) and writes the ones still live
// (ms, quiet) while the volume has room for them, counting what memcached
// refused to store, or what found no room, as dropped.
func copyBatchOf(get, set *rw, batch []string, room func() (int64, error), m *Migration) error {
	if len(batch) == 0 {
		return nil
	}
	budget, err := room()
	if err != nil {
		return err
	}
	budget -= roomMargin
	deadline := time.Now().Add(copyIdle)
	_ = get.c.SetDeadline(deadline)
	_ = set.c.SetDeadline(deadline)
	for _, k := range batch {
		key, b := metaKey(k)
		if _, err := fmt.Fprintf(get.w, "mg %s%s v f t\r\n", key, b); err != nil {
			return err
		}
	}
	if err := get.w.Flush(); err != nil {
		return err
	}
	for _, k := range batch {
		line, err := get.r.ReadString('\n')
		if err != nil {
			return err
		}
		fields := strings.Fields(line)
		if len(fields) == 1 && fields[0] == "EN" {
			continue // expired or evicted since the dump
		}
		if len(fields) < 2 || fields[0] != "VA" {
			return fmt.Errorf("mg answered %q", line)
		}
		size, err := strconv.Atoi(fields[1])
		if err != nil {
			return fmt.Errorf("mg answered %q", line)
		}
		value := make([]byte, size+2)
		if _, err := io.ReadFull(get.r, value); err != nil {
			return err
		}
		flags, ttl := "0", "-1"
		for _, f := range fields[2:] {
			switch f[0] {
			case 'f':
				flags = f[1:]
			case 't':
				ttl = f[1:]
			}
		}
		expiry := ""
		switch ttl {
		case "-1":
		case "0":
			continue // expires now
		default:
			expiry = " T" + ttl
		}
		// An item takes its key, value and header in a chunk up to a
		// quarter larger (memcached's default growth factor).
		cost := int64(size+len(k)+56) * 5 / 4
		if m.Full || cost > budget {
			m.Full = true
			m.Dropped++
			continue
		}
		budget -= cost
		key, b := metaKey(k)
		if _, err := fmt.Fprintf(set.w, "ms %s %d%s%s F%s q\r\n", key, size, b, expiry, flags); err != nil {
			return err
		}
		if _, err := set.w.Write(value); err != nil {
			return err
		}
		m.Copied++
	}
	if _, err := set.w.WriteString("mn\r\n"); err != nil {
		return err
	}
	if err := set.w.Flush(); err != nil {
		return err
	}
	for {
		line, err := set.r.ReadString('\n')
		if err != nil {
			return err
		}
		if line == "MN\r\n" {
			return nil
		}
		// Quiet mode answers only failures: an item too large for the new
		// settings, or no memory to store it.
		m.Copied--
		m.Dropped++
	}
}
