package authreload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/internal/exporter"
	"github.com/example/memcached-operator/test/logbuf"
)

// TestMain makes the test binary a stand-in for memcached when asked: it
// prints a line for each SIGHUP it receives.
func TestMain(m *testing.M) {
	if os.Getenv("AUTHRELOAD_CHILD") == "1" {
		hup := make(chan os.Signal, 8)
		signal.Notify(hup, syscall.SIGHUP)
		fmt.Println("READY")
		for range hup {
			fmt.Println("HUP")
		}
	}
	os.Exit(m.Run())
}

// catchesHUP is a SigCgt mask with SIGHUP (and SIGTERM) caught.
const catchesHUP = "0000000000004001"

// fakeProc is a proc directory that lists only the given processes (pid →
// comm), each catching SIGHUP, so a test never signals a process it did
// not start.
func fakeProc(t *testing.T, comms map[int]string) string {
	t.Helper()
	dir := t.TempDir()
	for pid, comm := range comms {
		addProc(t, dir, pid, comm, "Name:\t"+comm+"\nSigCgt:\t"+catchesHUP+"\n")
	}
	// Entries /proc has beside the processes.
	for _, f := range []string{"self", "uptime", "sys"} {
		_ = os.MkdirAll(filepath.Join(dir, f), 0o755)
	}
	return dir
}

// addProc lists pid under dir with comm; its status is the given text, or
// the real process's when status is empty.
func addProc(t *testing.T, dir string, pid int, comm, status string) {
	t.Helper()
	p := filepath.Join(dir, strconv.Itoa(pid))
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "comm"), []byte(comm+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if status == "" {
		err = os.Symlink(fmt.Sprintf("/proc/%d/status", pid), filepath.Join(p, "status"))
	} else {
		err = os.WriteFile(filepath.Join(p, "status"), []byte(status), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func TestCatches(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	addProc(t, dir, 5, "memcached", "Name:\tmemcached\nSigCgt:\t"+catchesHUP+"\n")
	addProc(t, dir, 6, "memcached", "Name:\tmemcached\nSigCgt:\t0000000000004000\n")
	addProc(t, dir, 7, "memcached", "Name:\tmemcached\n")
	ok, err := Catches(dir, 5, syscall.SIGHUP)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	ok, err = Catches(dir, 6, syscall.SIGHUP)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "SIGTERM caught, SIGHUP not: its default action would end memcached")
	_, err = Catches(dir, 7, syscall.SIGHUP)
	g.Expect(err).To(HaveOccurred())
	// A process started with SIGHUP ignored (nohup, as CI runs) keeps it
	// ignored until it asks for it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ok, err = Catches("/proc", os.Getpid(), syscall.SIGHUP)
	g.Expect(err).NotTo(HaveOccurred(), "reads the real format")
	g.Expect(ok).To(BeTrue(), "this process catches SIGHUP")
}

// TestNeverSignalsAProcessThatDoesNotCatchIt keeps the signal due while
// memcached has no handler yet, rather than end it.
func TestNeverSignalsAProcessThatDoesNotCatchIt(t *testing.T) {
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "auth-file")
	swap(t, file, "a:1\n")
	proc := t.TempDir()
	addProc(t, proc, 8, "memcached", "Name:\tmemcached\nSigCgt:\t0000000000000000\n")
	sent := make(chan int, 8)
	start(t, &Reloader{File: file, ProcDir: proc, Comm: "memcached", Signal: syscall.SIGHUP, Interval: 20 * time.Millisecond,
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		kill: func(pid int, _ syscall.Signal) error { sent <- pid; return nil }})
	g.Consistently(sent, 200*time.Millisecond).ShouldNot(Receive())
	g.Expect(os.WriteFile(filepath.Join(proc, "8", "status"), []byte("Name:\tmemcached\nSigCgt:\t"+catchesHUP+"\n"), 0o644)).To(Succeed())
	g.Eventually(sent).Should(Receive(Equal(8)))
}

func TestFindProcesses(t *testing.T) {
	g := NewWithT(t)
	dir := fakeProc(t, map[int]string{1: "pause", 7: "memcached", 12: "memcached-auth-", 40: "memcached"})
	g.Expect(os.MkdirAll(filepath.Join(dir, "99"), 0o755)).To(Succeed()) // exited while listed: no comm
	pids, err := FindProcesses(dir, "memcached")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pids).To(ConsistOf(7, 40))
	_, err = FindProcesses(filepath.Join(dir, "absent"), "memcached")
	g.Expect(err).To(HaveOccurred())
}

// swap replaces file atomically, as the kubelet does a Secret volume's.
func swap(t *testing.T, file, content string) {
	t.Helper()
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
}

func start(t *testing.T, r *Reloader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// TestSignalsOnlyOnChange runs a real child process under a fake proc dir
// and counts the SIGHUPs it receives: one per change of content, none for
// a rewrite of the same content.
func TestSignalsOnlyOnChange(t *testing.T) {
	g := NewWithT(t)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "AUTHRELOAD_CHILD=1")
	out, err := child.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(child.Start()).To(Succeed())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	lines := make(chan string, 16)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines <- s.Text()
		}
	}()
	g.Eventually(lines).Should(Receive(Equal("READY")))

	file := filepath.Join(t.TempDir(), "auth-file")
	swap(t, file, "a:1\n")
	proc := fakeProc(t, map[int]string{os.Getpid(): "authreload.test"})
	// The child's real status: it catches SIGHUP once it printed READY.
	addProc(t, proc, child.Process.Pid, "memcached", "")
	start(t, &Reloader{
		File: file, ProcDir: proc,
		Comm: "memcached", Signal: syscall.SIGHUP, Interval: 20 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})

	g.Eventually(lines).Should(Receive(Equal("HUP")), "one signal at start, in case the file changed before the reloader read it")
	g.Consistently(lines, 200*time.Millisecond).ShouldNot(Receive(), "then none while the content stays")
	swap(t, file, "a:1\n")
	g.Consistently(lines, 200*time.Millisecond).ShouldNot(Receive(), "same content, new file: nothing to reload")
	swap(t, file, "a:2\n")
	g.Eventually(lines).Should(Receive(Equal("HUP")))
	g.Consistently(lines, 200*time.Millisecond).ShouldNot(Receive(), "one signal per change")
	swap(t, file, "a:3\nb:4\n")
	g.Eventually(lines).Should(Receive(Equal("HUP")))
}

// TestRetriesUntilSignalled keeps a change pending while memcached is not
// there to signal, and delivers it once it is.
func TestRetriesUntilSignalled(t *testing.T) {
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "auth-file")
	swap(t, file, "a:1\n")
	proc := fakeProc(t, nil)
	sent := make(chan int, 8)
	r := &Reloader{File: file, ProcDir: proc, Comm: "memcached", Signal: syscall.SIGHUP, Interval: 20 * time.Millisecond,
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		kill: func(pid int, _ syscall.Signal) error { sent <- pid; return nil }}
	start(t, r)
	swap(t, file, "a:2\n")
	g.Consistently(sent, 200*time.Millisecond).ShouldNot(Receive())
	addProc(t, proc, 33, "memcached", "SigCgt:\t"+catchesHUP+"\n")
	g.Eventually(sent).Should(Receive(Equal(33)))
	g.Consistently(sent, 200*time.Millisecond).ShouldNot(Receive(), "delivered once")
	swap(t, file, "a:3\n")
	g.Eventually(sent).Should(Receive(Equal(33)))
}

// TestRefusesAFileMemcachedWouldMisread: a file past memcached's limits (or
// that it would refuse) is not reloaded, and the log says so; memcached keeps
// the credentials it has until the file is fixed.
func TestRefusesAFileMemcachedWouldMisread(t *testing.T) {
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "auth-file")
	swap(t, file, "a:1\n")
	proc := fakeProc(t, nil)
	addProc(t, proc, 33, "memcached", "SigCgt:\t"+catchesHUP+"\n")
	sent := make(chan int, 8)
	var logs logbuf.Buffer
	r := &Reloader{File: file, ProcDir: proc, Comm: "memcached", Signal: syscall.SIGHUP, Interval: 20 * time.Millisecond,
		Log:  slog.New(slog.NewTextHandler(&logs, nil)),
		kill: func(pid int, _ syscall.Signal) error { sent <- pid; return nil }}
	start(t, r)
	g.Eventually(sent).Should(Receive(Equal(33)), "the signal at start")
	swap(t, file, strings.Repeat("u:p\n", MaxAuthEntries+1))
	g.Eventually(logs.String).Should(ContainSubstring("memcached keeps its current credentials"))
	g.Expect(logs.String()).To(ContainSubstring("more than 8 entries"))
	g.Consistently(sent, 200*time.Millisecond).ShouldNot(Receive(), "not reloaded")
	swap(t, file, "a:2\n")
	g.Eventually(sent).Should(Receive(Equal(33)), "a fixed file is")
}

func TestMissingFileAtStartFails(t *testing.T) {
	r := &Reloader{File: filepath.Join(t.TempDir(), "absent"), Interval: time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	NewWithT(t).Expect(r.Run(context.Background())).To(HaveOccurred())
}

// TestRotatesRealMemcached rotates the password of Debian's memcached (the
// image's) without restarting it: the reloader's SIGHUP makes it re-read
// the auth file, the new password is accepted and the old one refused, and
// the process, with its cache, is the same.
func TestRotatesRealMemcached(t *testing.T) {
	bin := memcachedBinary(t)
	g := NewWithT(t)
	dir := t.TempDir()
	// memcached drops to nobody when the tests run as root: it must read the file.
	g.Expect(os.Chmod(dir, 0o755)).To(Succeed())
	g.Expect(os.Chmod(filepath.Dir(dir), 0o755)).To(Succeed())
	file := filepath.Join(dir, "auth-file")
	swap(t, file, "app:old\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := ln.Addr().String()
	_ = ln.Close()
	args := []string{"-l", "127.0.0.1", "-p", addr[strings.LastIndex(addr, ":")+1:], "-U", "0", "-m", "16", "-Y", file}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	mc := exec.Command(bin, args...)
	mc.Stderr = os.Stderr
	g.Expect(mc.Start()).To(Succeed())
	t.Cleanup(func() { _ = mc.Process.Kill(); _ = mc.Wait() })

	login := func(user, pass string) error {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		return exporter.Authenticate(bufio.NewReadWriter(bufio.NewReader(conn), bufio.NewWriter(conn)), exporter.Credentials{Username: user, Password: pass})
	}
	g.Eventually(func() error { return login("app", "old") }).Should(Succeed())
	kept := keepsItsCache(t, g, addr, "app", "old")
	proc := t.TempDir()
	addProc(t, proc, mc.Process.Pid, "memcached", "")
	start(t, &Reloader{
		File: file, ProcDir: proc,
		Comm: "memcached", Signal: syscall.SIGHUP, Interval: 50 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	swap(t, file, "app:new\n")
	began := time.Now()
	// memcached applies a SIGHUP on its next clock tick, once a second.
	g.Eventually(func() error { return login("app", "new") }).WithTimeout(5 * time.Second).Should(Succeed())
	t.Logf("new password accepted %s after the file changed", time.Since(began).Round(time.Millisecond))
	g.Expect(login("app", "old")).To(MatchError(ContainSubstring("authentication failure")))
	kept("app", "new")
}
