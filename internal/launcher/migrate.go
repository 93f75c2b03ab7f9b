package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
