package launcher

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
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
	return runWith(t, g, dir, func(l *Launcher) { l.started = started })
}

// runWith is run with the launcher adjusted by edit before it starts; with
// an ArgsFile, the file is written with the command line run would use.
func runWith(t *testing.T, g Gomega, dir string, edit func(*Launcher)) (addr string, stop chan os.Signal, out <-chan Outcome) {
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
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	edit(l)
	if l.ArgsFile != "" {
		writeArgs(g, l.ArgsFile, l.Args)
		l.Args = nil
	}
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

// stopSaved stops the launcher as the kubelet does and expects the cache
// saved.
func stopSaved(g Gomega, stop chan os.Signal, out <-chan Outcome) {
	stop <- syscall.SIGTERM
	g.Eventually(out).WithTimeout(10 * time.Second).Should(Receive(HaveField("Saved", true)))
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
	stopSaved(g, stop, out)
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
	stopSaved(g, stop, out)
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

func writeArgs(g Gomega, path string, args []string) {
	raw, err := json.Marshal(args)
	g.Expect(err).NotTo(HaveOccurred())
	// Written whole, as the kubelet swaps a downward API file.
	g.Expect(os.WriteFile(path+".tmp", raw, 0o644)).To(Succeed())
	g.Expect(os.Rename(path+".tmp", path)).To(Succeed())
}

// maxConns is memcached's -c as it reports it.
func maxConns(g Gomega, addr string) string {
	c, err := net.Dial("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = fmt.Fprint(c, "stats settings\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		if v, ok := strings.CutPrefix(line, "STAT maxconns "); ok {
			return strings.TrimSpace(v)
		}
		g.Expect(line).NotTo(Equal("END\r\n"), "no maxconns in stats settings")
	}
}

// TestNewOptionsRestartWarm: a changed args file ends the launcher with the
// cache saved, exit code 0 (the kubelet starts the container again), and
// the next launcher runs memcached with the new options on the same cache;
// a file that does not parse is ignored until it does.
func TestNewOptionsRestartWarm(t *testing.T) {
	g := NewWithT(t)
	dir := tempDir(t, g)
	argsFile := filepath.Join(dir, "args")
	var args []string // the first run's, to change
	addr, _, out := runWith(t, g, dir, func(l *Launcher) {
		l.ArgsFile, l.poll = argsFile, 20*time.Millisecond
		l.Args = append(l.Args, "-c", "1024")
		args = slices.Clone(l.Args)
	})
	g.Expect(maxConns(g, addr)).To(Equal("1024"))
	keys(g, addr, 500, true)

	g.Expect(os.WriteFile(argsFile, []byte(`["-c", `), 0o644)).To(Succeed())
	g.Consistently(out).WithTimeout(200*time.Millisecond).ShouldNot(Receive(), "a half-written file is not acted on")
	args[len(args)-1] = "2048"
	writeArgs(g, argsFile, args)
	var o Outcome
	g.Eventually(out).WithTimeout(10 * time.Second).Should(Receive(&o))
	g.Expect(o).To(And(HaveField("Saved", true), HaveField("ExitCode", 0)))
	g.Expect(o.Message).To(ContainSubstring("options changed"))

	addr, stop, out := runWith(t, g, dir, func(l *Launcher) {
		l.ArgsFile = argsFile
		l.Args = append(l.Args, "-c", "2048")
	})
	g.Expect(maxConns(g, addr)).To(Equal("2048"), "the new options")
	g.Expect(keys(g, addr, 500, false)).To(Equal(500), "every key back")
	stopSaved(g, stop, out)
}

// TestUnreadableArgsFile: without a command line there is nothing to run;
// the container ends with the reason.
func TestUnreadableArgsFile(t *testing.T) {
	g := NewWithT(t)
	dir := tempDir(t, g)
	g.Expect(os.WriteFile(filepath.Join(dir, "args"), []byte("-c 1024"), 0o644)).To(Succeed())
	l := &Launcher{Memcached: "memcached", ArgsFile: filepath.Join(dir, "args"), MemoryFile: filepath.Join(dir, "memory"),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	o := l.Run(context.Background(), make(chan os.Signal))
	g.Expect(o.ExitCode).To(Equal(2))
	g.Expect(o.Message).To(ContainSubstring("no JSON array"))
}
