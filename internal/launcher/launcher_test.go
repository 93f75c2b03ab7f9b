package launcher

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/test/logbuf"
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
	ended := make(chan struct{})
	// t.Context ends before the cleanups: a launcher a failed test leaves
	// running stops, and its files outlive it until it has.
	go func() { defer close(ended); res <- l.Run(t.Context(), stop) }()
	t.Cleanup(func() {
		select {
		case <-ended:
		case <-time.After(time.Minute):
			t.Error("the launcher did not end within a minute of the test")
		}
	})
	// A start that copies the cache listens only once the copy is done,
	// which takes seconds more on a machine busy with other suites.
	g.Eventually(func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
	return addr, stop, res
}

// keys sets n keys, or counts how many of them memcached still serves.
func keys(g Gomega, addr string, n int, set bool) int {
	c, err := net.Dial("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
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
	g.Eventually(out).WithTimeout(time.Minute).Should(Receive(HaveField("Saved", true)))
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
	g.Eventually(out).WithTimeout(time.Minute).Should(Receive(&o))
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
	g.Eventually(out).WithTimeout(time.Minute).Should(Receive(&o))
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
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
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
	g.Eventually(out).WithTimeout(time.Minute).Should(Receive(&o))
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

// send writes one request to memcached at addr and reads its answer up to
// and including a line that starts with one of ends.
func send(g Gomega, addr, req string, ends ...string) string {
	c, err := net.Dial("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = c.Write([]byte(req))
	g.Expect(err).NotTo(HaveOccurred())
	r := bufio.NewReader(c)
	var out strings.Builder
	for {
		line, err := r.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred(), "after %q", out.String())
		out.WriteString(line)
		for _, e := range ends {
			if strings.HasPrefix(line, e) {
				return out.String()
			}
		}
	}
}

// withMemory sets memcached's -m in the launcher's command line.
func withMemory(mb int) func(*Launcher) {
	return func(l *Launcher) {
		i := slices.Index(l.Args, "-m")
		l.Args[i+1] = strconv.Itoa(mb)
	}
}

// TestNewItemMemoryCopiesTheCache: memcached refuses a saved cache made
// under another -m; the launcher copies the items into a file made under
// the new one instead, with their flags and times to live, keys the text
// protocol cannot spell included, and memcached then runs on it with the
// new item memory and every key.
func TestNewItemMemoryCopiesTheCache(t *testing.T) {
	g := NewWithT(t)
	dir := tempDir(t, g)
	addr, stop, out := runWith(t, g, dir, withMemory(64))
	keys(g, addr, 2000, true)
	g.Expect(send(g, addr, "set flagged 4242 0 2\r\nhi\r\nset expiring 7 3600 2\r\nho\r\n", "STORED", "ERROR")).To(Equal("STORED\r\n"))
	binaryKey := base64.StdEncoding.EncodeToString([]byte("a key\x00with bytes"))
	g.Expect(send(g, addr, "ms "+binaryKey+" 3 b F9\r\nbin\r\n", "HD", "CLIENT_ERROR", "SERVER_ERROR")).To(Equal("HD\r\n"))
	stopSaved(g, stop, out)

	addr, stop, out = runWith(t, g, dir, withMemory(128))
	g.Expect(send(g, addr, "stats settings\r\n", "STAT maxbytes ")).To(HaveSuffix("STAT maxbytes 134217728\r\n"), "the new item memory")
	g.Expect(keys(g, addr, 2000, false)).To(Equal(2000), "every key copied")
	g.Expect(send(g, addr, "mg flagged f t v\r\n", "EN", "VA")).To(Equal("VA 2 f4242 t-1\r\n"))
	g.Expect(send(g, addr, "mg expiring f t\r\n", "EN", "HD")).To(MatchRegexp(`^HD f7 t3(5[6-9][0-9]|600)\r\n$`), "the time to live kept")
	g.Expect(send(g, addr, "mg "+binaryKey+" b f v\r\n", "EN", "VA")).To(HavePrefix("VA 3 f9"))
	stopSaved(g, stop, out)
	for _, f := range []string{"memory.next", "memory.next.meta", "old.sock", "new.sock"} {
		g.Expect(filepath.Join(dir, f)).NotTo(BeAnExistingFile(), "nothing of the copy left behind")
	}

	// A plain restart on the new file is warm, as before.
	addr, stop, out = runWith(t, g, dir, withMemory(128))
	g.Expect(keys(g, addr, 2000, false)).To(Equal(2000))
	stopSaved(g, stop, out)
}

// TestLessItemMemoryKeepsWhatFits: a cache larger than the new item memory
// keeps as much as fits: at least what the same writes leave in a fresh
// memcached with that item memory.
func TestLessItemMemoryKeepsWhatFits(t *testing.T) {
	g := NewWithT(t)
	value := strings.Repeat("v", 100<<10)
	const n = 1000 // about 100 MiB
	fill := func(addr string) {
		var req strings.Builder
		for i := range n {
			req.WriteString("set big-" + strconv.Itoa(i) + " 0 0 " + strconv.Itoa(len(value)) + " noreply\r\n" + value + "\r\n")
		}
		req.WriteString("mn\r\n")
		send(g, addr, req.String(), "MN")
	}
	count := func(addr string) (kept int) {
		for i := range n {
			if strings.HasPrefix(send(g, addr, "mg big-"+strconv.Itoa(i)+"\r\n", "EN", "HD"), "HD") {
				kept++
			}
		}
		return kept
	}
	addr, stop, out := runWith(t, g, tempDir(t, g), withMemory(64))
	fill(addr)
	fits := count(addr)
	stopSaved(g, stop, out)
	g.Expect(fits).To(BeNumerically(">", n/10))

	dir := tempDir(t, g)
	addr, stop, out = runWith(t, g, dir, withMemory(128))
	fill(addr)
	g.Expect(count(addr)).To(BeNumerically(">", fits), "more in the larger cache")
	stopSaved(g, stop, out)
	addr, stop, out = runWith(t, g, dir, withMemory(64))
	g.Expect(count(addr)).To(BeNumerically(">=", fits*95/100), "as much as fits")
	stopSaved(g, stop, out)
}

// TestSmallerMaxItemSizeDropsWhatNoLongerFits: a copy into a memcached
// with a smaller -I keeps every item the new size allows and drops, and
// counts, the ones it does not: memcached refuses them.
func TestSmallerMaxItemSizeDropsWhatNoLongerFits(t *testing.T) {
	g := NewWithT(t)
	dir := tempDir(t, g)
	withItemSize := func(size string) func(*Launcher) {
		return func(l *Launcher) { l.Args = append(l.Args, "-I", size) }
	}
	addr, stop, out := runWith(t, g, dir, withItemSize("2m"))
	keys(g, addr, 500, true)
	large := strings.Repeat("L", 1536<<10)
	for i := range 3 {
		g.Expect(send(g, addr, fmt.Sprintf("set large-%d 0 0 %d\r\n%s\r\n", i, len(large), large), "STORED", "SERVER_ERROR")).
			To(Equal("STORED\r\n"))
	}
	stopSaved(g, stop, out)

	var log logbuf.Buffer
	addr, stop, out = runWith(t, g, dir, func(l *Launcher) {
		withItemSize("1m")(l)
		l.Log = slog.New(slog.NewTextHandler(&log, nil))
	})
	g.Expect(keys(g, addr, 500, false)).To(Equal(500), "every item that fits copied")
	for i := range 3 {
		g.Expect(send(g, addr, fmt.Sprintf("mg large-%d\r\n", i), "EN", "HD")).To(Equal("EN\r\n"), "too large for -I 1m")
	}
	g.Expect(log.String()).To(MatchRegexp(`msg="Copied the saved cache into a new memory file" copied=500 dropped=3 `))
	stopSaved(g, stop, out)
}

// TestCopyStopsWhenTheVolumeIsFull: a copy takes no more than the room
// the memory volume has left (a write past its end would kill memcached),
// and memcached serves what it copied.
func TestCopyStopsWhenTheVolumeIsFull(t *testing.T) {
	g := NewWithT(t)
	// On tmpfs, as a pod's memory-backed volume: a memory file takes its
	// pages there as memcached touches them.
	dir, err := os.MkdirTemp("/dev/shm", "launcher-")
	g.Expect(err).NotTo(HaveOccurred(), "a tmpfs at /dev/shm")
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	g.Expect(os.Chmod(dir, 0o777)).To(Succeed())
	addr, stop, out := runWith(t, g, dir, withMemory(64))
	value := strings.Repeat("v", 10<<10)
	var req strings.Builder
	const n = 1000 // about 10 MiB
	for i := range n {
		req.WriteString("set item-" + strconv.Itoa(i) + " 0 0 " + strconv.Itoa(len(value)) + " noreply\r\n" + value + "\r\n")
	}
	req.WriteString("mn\r\n")
	send(g, addr, req.String(), "MN")
	stopSaved(g, stop, out)

	// A volume with room for 4 MiB beyond the margin and what both
	// memcacheds took when they started (the copy asks first then).
	const room = 4 << 20
	var capacity int64
	addr, stop, out = runWith(t, g, dir, func(l *Launcher) {
		withMemory(128)(l)
		l.free = func(dir string) (int64, error) {
			if capacity == 0 {
				capacity = used(g, dir) + roomMargin + room
			}
			return capacity - used(g, dir), nil
		}
	})
	kept := 0
	for i := range n {
		if strings.HasPrefix(send(g, addr, "mg item-"+strconv.Itoa(i)+"\r\n", "EN", "HD"), "HD") {
			kept++
		}
	}
	g.Expect(kept).To(BeNumerically(">", room/(len(value)*2)), "what fits is copied")
	// and no more, but for the slab page memcached preallocated for the
	// items' size, which held some before the volume counted them.
	g.Expect(kept).To(BeNumerically("<=", (room+1<<20)/len(value)), "and no more")
	stopSaved(g, stop, out)
}

// TestPrivateArgs: the copy's memcacheds listen on their UNIX socket only,
// without TLS, auth or anything that would refuse a metadump, and keep
// every other option.
func TestPrivateArgs(t *testing.T) {
	g := NewWithT(t)
	args := []string{"--disable-cas", "-o", "modern,no_lru_crawler", "-X", "-p", "11211", "-m", "64", "-c", "1024", "-t", "2", "-I", "1m", "-vv",
		"-Y", "/auth", "-e", "/var/lib/memcached/memory",
		"-Z", "-l", "*:11211,notls:127.0.0.1:11299", "-o", "ssl_chain_cert=/tls/crt,ssl_key=/tls/key,ssl_verify_mode=0", "-U0"}
	g.Expect(privateArgs(args, "/m/memory.next", "/m/new.sock")).To(Equal([]string{
		"-C", "-o", "modern,no_lru_crawler", "-m", "64", "-c", "1024", "-t", "2", "-I", "1m", "-v", "-v",
		"-o", "lru_crawler", "-s", "/m/new.sock", "-e", "/m/memory.next"}))
}

// TestMigrationFailureStartsCold: a copy that cannot run (here, memcached
// refuses the new command line) drops the saved cache, so that the start
// that follows is cold instead of a retry, and leaves no file behind.
func TestMigrationFailureStartsCold(t *testing.T) {
	g := NewWithT(t)
	dir := savedCache(t, g, 10)
	l := &Launcher{Memcached: memcachedbin.Path(t), MemoryFile: filepath.Join(dir, "memory"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	old, err := os.ReadFile(l.MemoryFile + argsSuffix)
	g.Expect(err).NotTo(HaveOccurred())
	var oldArgs []string
	g.Expect(json.Unmarshal(old, &oldArgs)).To(Succeed())
	g.Expect(l.waitGap()).To(BeTrue())
	_, err = l.migrate(oldArgs, append(slices.Clone(oldArgs), "-f", "0.5"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(l.Warm()).To(BeFalse())
	g.Expect(filepath.Join(dir, "memory.next")).NotTo(BeAnExistingFile())
}

// used is what the files in dir take on their filesystem, as a volume's
// free space counts it (a memory file's pages as memcached touches them).
func used(g Gomega, dir string) int64 {
	var sum int64
	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err == nil {
			sum += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
	}
	return sum
}

// TestUnrecordedCommandLineStartsWarm: a saved cache without the command
// line it was made under (a launcher that could not write it) is taken as
// compatible and left to memcached, which serves it again under the same
// settings.
func TestUnrecordedCommandLineStartsWarm(t *testing.T) {
	g := NewWithT(t)
	dir := savedCache(t, g, 100)
	g.Expect(os.Remove(filepath.Join(dir, "memory"+argsSuffix))).To(Succeed())
	addr, stop, out := runWith(t, g, dir, withMemory(64))
	g.Expect(keys(g, addr, 100, false)).To(Equal(100))
	stopSaved(g, stop, out)
}

// savedCache is a directory whose memory file, made under -m 64, holds n
// keys, saved.
func savedCache(t *testing.T, g Gomega, n int) string {
	dir := tempDir(t, g)
	addr, stop, out := runWith(t, g, dir, withMemory(64))
	keys(g, addr, n, true)
	stopSaved(g, stop, out)
	return dir
}
