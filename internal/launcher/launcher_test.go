package launcher

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/test/memcachedbin"
)

// run starts a launcher over a real memcached on a free loopback port and
// returns its address, a stop channel and the outcome to come.
func run(t *testing.T, g Gomega, dir string, started func(*os.Process)) (addr string, stop chan os.Signal, out <-chan Outcome) {
	t.Helper()
	bin := memcachedbin.Path(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr = ln.Addr().String()
	_ = ln.Close()
	file := filepath.Join(dir, "memory")
	args := []string{"-l", "127.0.0.1", "-p", addr[strings.LastIndex(addr, ":")+1:], "-U", "0", "-m", "64", "-e", file}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	l := &Launcher{Memcached: bin, Args: args, MemoryFile: file, TerminationLog: filepath.Join(dir, "termination-log"),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), started: started}
	stop = make(chan os.Signal, 1)
	res := make(chan Outcome, 1)
	go func() { res <- l.Run(context.Background(), stop) }()
	g.Eventually(func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).WithTimeout(5 * time.Second).Should(Succeed())
	return addr, stop, res
}

// keys sets n keys, or counts how many of them memcached still serves.
func keys(g Gomega, addr string, n int, set bool) int {
	c, err := net.Dial("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	found := 0
	for i := range n {
		if set {
			v := fmt.Sprintf("value-%d", i)
			_, _ = fmt.Fprintf(w, "set key-%d 0 0 %d\r\n%s\r\n", i, len(v), v)
		} else {
			_, _ = fmt.Fprintf(w, "get key-%d\r\n", i)
		}
		g.Expect(w.Flush()).To(Succeed())
		line, err := r.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		switch {
		case set:
			g.Expect(line).To(Equal("STORED\r\n"))
		case strings.HasPrefix(line, "VALUE "):
			value, _ := r.ReadString('\n')
			end, _ := r.ReadString('\n')
			g.Expect(value).To(Equal(fmt.Sprintf("value-%d\r\n", i)))
			g.Expect(end).To(Equal("END\r\n"))
			found++
		default:
			g.Expect(line).To(Equal("END\r\n"))
		}
	}
	return found
}

func tempDir(t *testing.T, g Gomega) string {
	dir := t.TempDir()
	// memcached drops to nobody when the tests run as root: it must write the file.
	g.Expect(os.Chmod(dir, 0o777)).To(Succeed())
	g.Expect(os.Chmod(filepath.Dir(dir), 0o755)).To(Succeed())
	return dir
}

// TestStopKeepsTheCache: the container's stop (SIGTERM) saves the cache,
// and the next memcached on the same file, started at once, serves every
// key again; the termination message says so.
func TestStopKeepsTheCache(t *testing.T) {
	g := NewWithT(t)
	dir := tempDir(t, g)
	addr, stop, out := run(t, g, dir, nil)
	keys(g, addr, 1000, true)
	stop <- syscall.SIGTERM
	var o Outcome
	g.Eventually(out).WithTimeout(10 * time.Second).Should(Receive(&o))
	g.Expect(o).To(HaveField("Saved", true))
	g.Expect(o.ExitCode).To(BeZero())
	g.Expect(os.ReadFile(filepath.Join(dir, "termination-log"))).To(ContainSubstring("the next start in this pod is warm"))

	addr, stop, out = run(t, g, dir, nil)
	g.Expect(keys(g, addr, 1000, false)).To(Equal(1000), "every key back")
	stop <- syscall.SIGTERM
	g.Eventually(out).WithTimeout(10 * time.Second).Should(Receive(HaveField("Saved", true)))
}

// TestCrashStartsCold: a memcached killed without the chance to save (a
// crash, an OOM kill) leaves a memory file without metadata; the next one
// starts cold, and the termination message says so.
func TestCrashStartsCold(t *testing.T) {
	g := NewWithT(t)
	dir := tempDir(t, g)
	var proc *os.Process
	addr, _, out := run(t, g, dir, func(p *os.Process) { proc = p })
	keys(g, addr, 100, true)
	g.Expect(proc.Signal(syscall.SIGKILL)).To(Succeed())
	var o Outcome
	g.Eventually(out).WithTimeout(10 * time.Second).Should(Receive(&o))
	g.Expect(o.Saved).To(BeFalse())
	g.Expect(o.ExitCode).To(Equal(137))
	g.Expect(os.ReadFile(filepath.Join(dir, "termination-log"))).To(ContainSubstring("the next start is cold"))

	addr, stop, out := run(t, g, dir, nil)
	g.Expect(keys(g, addr, 100, false)).To(BeZero(), "a cache that was not saved is not trusted")
	stop <- syscall.SIGTERM
	g.Eventually(out).WithTimeout(10 * time.Second).Should(Receive(HaveField("Saved", true)))
}

// TestInstall copies the running binary, executable, where asked.
func TestInstall(t *testing.T) {
	g := NewWithT(t)
	dst := filepath.Join(t.TempDir(), "memcached-launcher")
	g.Expect(Install(dst)).To(Succeed())
	self, err := os.Executable()
	g.Expect(err).NotTo(HaveOccurred())
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	fi, _ := os.Stat(dst)
	g.Expect(fi.Mode().Perm() & 0o111).NotTo(BeZero())
}
