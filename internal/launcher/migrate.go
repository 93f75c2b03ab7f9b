package launcher

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/example/memcached-operator/internal/policy"
)

// A memory file records the command line it was made under in
// MemoryFile.args: memcached refuses a saved cache whose item memory or
// slab layout differ from its own (policy.MemoryFileSettings), and the
// launcher then copies the items into a new file instead of losing them.
const (
	argsSuffix = ".args"
	nextSuffix = ".next"
	// copyBatch is how many items one round trip reads and writes.
	copyBatch = 256
	// copyIdle bounds one round trip with either memcached.
	copyIdle = 30 * time.Second
	// privateStart bounds a private memcached's start.
	privateStart = 30 * time.Second
)

// Migration is what a copy of a saved cache into a new memory file did.
type Migration struct {
	Copied, Dropped int
	// Full: the volume had no room for more; the items not copied are lost.
	Full bool
	Took time.Duration
}

// roomMargin is left free on the memory volume by a copy: memcached takes
// its memory a slab page (1 MiB) at a time, for each size of item, and a
// write past the volume's end kills it.
const roomMargin = 8 << 20

// recordArgs writes the command line memcached is about to make or reuse
// the memory file under.
func (l *Launcher) recordArgs(args []string) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	tmp := l.MemoryFile + argsSuffix + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, l.MemoryFile+argsSuffix)
}

// savedUnder is the command line of the saved cache when args would make
// memcached refuse it, else nil. A file saved by a launcher that recorded
// no command line is taken as compatible, as before.
func (l *Launcher) savedUnder(args []string) []string {
	if !l.Warm() {
		return nil
	}
	raw, err := os.ReadFile(l.MemoryFile + argsSuffix)
	if err != nil {
		return nil
	}
	var old []string
	if json.Unmarshal(raw, &old) != nil || len(old) == 0 {
		return nil
	}
	if maps.Equal(policy.MemoryFileSettings(old), policy.MemoryFileSettings(args)) {
		return nil
	}
	return old
}

// migrate restores the saved cache with the command line it was made under
// and copies its items into a memory file made under args, both memcacheds
// private (a UNIX socket beside the file, no client), and puts the new file
// in the old one's place, saved, for the start that follows. On an error
// the saved cache is dropped, so that the next start is cold rather than a
// retry that fails again. Items past the new item memory are evicted as
// memcached evicts, least recently copied first.
func (l *Launcher) migrate(old, args []string) (Migration, error) {
	began := time.Now()
	next := l.MemoryFile + nextSuffix
	dir := filepath.Dir(l.MemoryFile)
	oldSock, newSock := filepath.Join(dir, "old.sock"), filepath.Join(dir, "new.sock")
	for _, f := range []string{next, next + ".meta", oldSock, newSock} {
		_ = os.Remove(f)
	}
	fail := func(m Migration, err error) (Migration, error) {
		_ = os.Remove(l.MemoryFile + ".meta")
		_ = os.Remove(next)
		_ = os.Remove(next + ".meta")
		m.Took = time.Since(began)
		return m, err
	}
	defer func() {
		_ = os.Remove(oldSock)
		_ = os.Remove(newSock)
	}()
	src, err := l.private(privateArgs(old, l.MemoryFile, oldSock), oldSock)
	if err != nil {
		return fail(Migration{}, fmt.Errorf("restoring the saved cache: %w", err))
	}
	defer src.kill()
	dst, err := l.private(privateArgs(args, next, newSock), newSock)
	if err != nil {
		return fail(Migration{}, fmt.Errorf("starting memcached on the new memory file: %w", err))
	}
	defer dst.kill()
	free := freeBytes
	if l.free != nil {
		free = l.free
	}
	m, err := copyItems(oldSock, newSock, func() (int64, error) { return free(dir) })
	if err != nil {
		return fail(m, fmt.Errorf("copying items: %w", err))
	}
	if err := dst.save(); err != nil {
		return fail(m, fmt.Errorf("saving the new memory file: %w", err))
	}
	src.kill()
	if err := os.Rename(next, l.MemoryFile); err != nil {
		return fail(m, err)
	}
	if err := os.Rename(next+".meta", l.MemoryFile+".meta"); err != nil {
		return fail(m, err)
	}
	m.Took = time.Since(began)
	return m, nil
}

// privateArgs is a command line for a memcached that serves only the
// launcher: no listener but a UNIX socket, no TLS nor auth, dumping and
// the LRU crawler on (metadump needs both), on the given memory file.
func privateArgs(args []string, file, sock string) []string {
	opts, _ := policy.ParseArgs(field.NewPath("args"), args)
	var out []string
	for _, o := range opts {
		switch o.Short {
		case 'p', 'U', 'l', 's', 'a', 'Z', 'Y', 'X', 'e', 'S':
			continue
		case 'o':
			var keep []string
			for _, kv := range strings.Split(o.Value, ",") {
				if k, _, _ := strings.Cut(strings.TrimSpace(kv), "="); !strings.HasPrefix(k, "ssl_") {
					keep = append(keep, kv)
				}
			}
			if len(keep) > 0 {
				out = append(out, "-o", strings.Join(keep, ","))
			}
			continue
		}
		out = append(out, "-"+string(o.Short))
		if o.Value != "" {
			out = append(out, o.Value)
		}
	}
	return append(out, "-o", "lru_crawler", "-s", sock, "-e", file)
}

type privateMemcached struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// private starts memcached with args and waits until its socket answers.
func (l *Launcher) private(args []string, sock string) (*privateMemcached, error) {
	cmd := exec.Command(l.Memcached, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &privateMemcached{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(privateStart)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil {
			_ = c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("memcached %v ended at start: %w", args, p.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("memcached %v did not open %s in %s", args, sock, privateStart)
		}
	}
}

// save stops memcached as a container stop does, writing the metadata.
func (p *privateMemcached) save() error {
	_ = p.cmd.Process.Signal(syscall.SIGUSR1)
	select {
	case <-p.done:
		return p.err
	case <-time.After(privateStart):
		return errors.New("memcached did not stop")
	}
}

// kill ends memcached, if it still runs, and waits for it.
func (p *privateMemcached) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// freeBytes is the room left on the filesystem of dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

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
