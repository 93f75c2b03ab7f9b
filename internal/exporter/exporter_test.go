package exporter_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/example/memcached-operator/internal/exporter"
	"github.com/example/memcached-operator/test/memcachedbin"
)

// fakeServer listens on loopback and answers each connection with answer.
type fakeServer struct {
	ln     net.Listener
	open   atomic.Int64
	served atomic.Int64
}

func serve(t *testing.T, answer func(conn net.Conn)) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.open.Add(1)
			s.served.Add(1)
			go func() {
				defer s.open.Add(-1)
				defer func() { _ = conn.Close() }()
				answer(conn)
			}()
		}
	}()
	return s
}

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

// replay answers `stats` and `stats settings` with what memcached 1.6.18
// printed (testdata), then waits for the client to hang up.
func replay(t *testing.T) func(net.Conn) {
	raw, err := os.ReadFile("testdata/memcached-1.6.18.txt")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitAfter(string(raw), "END\r\n")
	return func(conn net.Conn) {
		r := bufio.NewReader(conn)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch strings.TrimSpace(line) {
			case "stats":
				_, _ = io.WriteString(conn, parts[0])
			case "stats settings":
				_, _ = io.WriteString(conn, parts[1])
			case "stats slabs":
				_, _ = io.WriteString(conn, parts[2])
			case "stats items":
				_, _ = io.WriteString(conn, parts[3])
			default:
				_, _ = io.WriteString(conn, "ERROR\r\n")
			}
		}
	}
}

// scrape gathers once through a pedantic registry, as Prometheus would.
func scrape(t *testing.T, addr string, timeout time.Duration) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(exporter.NewCollector(addr, timeout, slog.New(slog.NewTextHandler(io.Discard, nil)))); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("a scrape must never fail: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// sample is the value of the series of family name with exactly these
// label pairs (name, value, name, value, ...).
func sample(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	mf, ok := mfs[name]
	if !ok {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)/2
		for i := 0; match && i+1 < len(labels); i += 2 {
			match = got[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		if m.Gauge != nil {
			return m.Gauge.GetValue(), true
		}
		return m.Counter.GetValue(), true
	}
	return 0, false
}

func value(t *testing.T, addr string, timeout time.Duration, name string, labels ...string) float64 {
	t.Helper()
	v, ok := sample(scrape(t, addr, timeout), name, labels...)
	if !ok {
		t.Fatalf("no %s%v", name, labels)
	}
	return v
}

func TestUpstreamNamesFromARealAnswer(t *testing.T) {
	g := NewWithT(t)
	s := serve(t, replay(t))
	mfs := scrape(t, s.addr(), time.Second)
	for _, name := range []string{
		"memcached_up", "memcached_uptime_seconds", "memcached_version", "memcached_commands_total", "memcached_current_bytes",
		"memcached_limit_bytes", "memcached_current_items", "memcached_items_total", "memcached_items_evicted_total",
		"memcached_items_reclaimed_total", "memcached_current_connections", "memcached_max_connections", "memcached_connections_total",
		"memcached_connections_listener_disabled_total", "memcached_read_bytes_total", "memcached_written_bytes_total",
		"memcached_process_user_cpu_seconds_total", "memcached_lru_crawler_enabled", "memcached_accepting_conns",
		"memcached_malloced_bytes", "memcached_slab_chunk_size_bytes", "memcached_slab_current_items", "memcached_slab_items_evicted_total",
		"memcached_slab_commands_total", "memcached_slab_mem_requested_bytes",
	} {
		g.Expect(mfs).To(HaveKey(name))
	}
	g.Expect(value(t, s.addr(), time.Second, "memcached_up")).To(Equal(1.0))
	g.Expect(value(t, s.addr(), time.Second, "memcached_limit_bytes")).To(Equal(64.0 * 1024 * 1024))
	g.Expect(value(t, s.addr(), time.Second, "memcached_max_connections")).To(Equal(1024.0))
	v, ok := sample(mfs, "memcached_version", "version", "1.6.18")
	g.Expect(ok).To(BeTrue())
	g.Expect(v).To(Equal(1.0))
	_, ok = sample(mfs, "memcached_commands_total", "command", "get", "status", "hit")
	g.Expect(ok).To(BeTrue())
	// Two items were stored: one small (class 1), one of 2000 bytes (class 15).
	sampled := func(name string, labels ...string) float64 {
		v, ok := sample(mfs, name, labels...)
		g.Expect(ok).To(BeTrue(), "%s%v", name, labels)
		return v
	}
	g.Expect(sampled("memcached_slab_chunk_size_bytes", "slab", "15")).To(Equal(2320.0))
	g.Expect(sampled("memcached_slab_current_items", "slab", "1")).To(Equal(1.0))
	g.Expect(sampled("memcached_slab_commands_total", "slab", "1", "command", "set", "status", "hit")).To(Equal(1.0))
	g.Expect(sampled("memcached_malloced_bytes")).To(BeNumerically(">", 0))
	g.Eventually(s.open.Load).Should(BeZero(), "the exporter hangs up once the scrape is done")
}

func TestDownServersGiveUpZero(t *testing.T) {
	const timeout = 300 * time.Millisecond
	endless := func(conn net.Conn) {
		for i := 0; ; i++ {
			if _, err := fmt.Fprintf(conn, "STAT s%d 1\r\n", i); err != nil {
				return
			}
		}
	}
	tests := map[string]func(net.Conn){
		"hangs after accepting":    func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) },
		"closes the connection":    func(net.Conn) {},
		"answers garbage":          func(conn net.Conn) { _, _ = io.WriteString(conn, "HTTP/1.1 400 Bad Request\r\n\r\n") },
		"answers ERROR":            func(conn net.Conn) { _, _ = io.WriteString(conn, "ERROR\r\n") },
		"sends a line without end": func(conn net.Conn) { _, _ = io.WriteString(conn, "STAT "+strings.Repeat("x", 10000)) },
		"never stops answering":    endless,
		"stops half way":           func(conn net.Conn) { _, _ = io.WriteString(conn, "STAT pid 1\r\nSTAT uptime 5\r\n") },
	}
	for name, answer := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := serve(t, answer)
			start := time.Now()
			g.Expect(value(t, s.addr(), timeout, "memcached_up")).To(BeZero())
			g.Expect(time.Since(start)).To(BeNumerically("<", 10*timeout), "the scrape is bounded by the timeout")
			g.Eventually(s.open.Load).Should(BeZero(), "no connection is left open")
		})
	}
	t.Run("nothing listens", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		NewWithT(t).Expect(value(t, addr, timeout, "memcached_up")).To(BeZero())
	})
}

// TestRealMemcached scrapes Debian's memcached (the one the project's
// images are built from) after a set and a get.
func TestRealMemcached(t *testing.T) {
	g := NewWithT(t)
	addr := startMemcached(t)
	conn, err := net.Dial("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.WriteString(conn, "set k 0 0 1\r\nx\r\nget k\r\nget missing\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	r := bufio.NewReader(conn)
	for _, want := range []string{"STORED", "VALUE k 0 1", "x", "END", "END"} {
		line, err := r.ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(strings.TrimSpace(line)).To(Equal(want))
	}
	_ = conn.Close()

	g.Expect(value(t, addr, time.Second, "memcached_up")).To(Equal(1.0))
	g.Expect(value(t, addr, time.Second, "memcached_limit_bytes")).To(Equal(16.0 * 1024 * 1024))
	g.Expect(value(t, addr, time.Second, "memcached_commands_total", "command", "set", "status", "hit")).To(Equal(1.0))
	g.Expect(value(t, addr, time.Second, "memcached_commands_total", "command", "get", "status", "hit")).To(Equal(1.0))
	g.Expect(value(t, addr, time.Second, "memcached_commands_total", "command", "get", "status", "miss")).To(Equal(1.0))
	g.Expect(value(t, addr, time.Second, "memcached_current_items")).To(Equal(1.0))
}

// startMemcached runs Debian's memcached on a loopback port with args
// added, stopped when the test ends, and returns its address once it
// accepts connections.
func startMemcached(t *testing.T, args ...string) string {
	t.Helper()
	bin := memcachedbin.Path(t)
	g := NewWithT(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	args = append([]string{"-l", "127.0.0.1", "-p", fmt.Sprint(port), "-U", "0", "-m", "16"}, args...)
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	g.Eventually(func() error {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).Should(Succeed())
	return addr
}

// TestRealMemcachedWithAuth scrapes a memcached that refuses every command
// until a client logs in (-Y): with the auth file the exporter logs in and
// scrapes; without it, or with a wrong password, memcached_up is 0.
func TestRealMemcachedWithAuth(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	// memcached drops to nobody when the tests run as root: it must read the file.
	g.Expect(os.Chmod(dir, 0o755)).To(Succeed())
	g.Expect(os.Chmod(filepath.Dir(dir), 0o755)).To(Succeed())
	file := dir + "/auth-file"
	g.Expect(os.WriteFile(file, []byte("scraper:s3cret\nother:x\n"), 0o644)).To(Succeed())
	addr := startMemcached(t, "-Y", file)

	conn, err := net.Dial("tcp", addr)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = io.WriteString(conn, "stats\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	line, err := bufio.NewReader(conn).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(line)).To(Equal("CLIENT_ERROR unauthenticated"), "the server really demands a login")
	_ = conn.Close()

	collect := func(authFile string) float64 {
		reg := prometheus.NewPedanticRegistry()
		c := exporter.NewCollector(addr, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if authFile != "" {
			c.WithAuthFile(authFile)
		}
		g.Expect(reg.Register(c)).To(Succeed())
		mfs, err := reg.Gather()
		g.Expect(err).NotTo(HaveOccurred())
		for _, mf := range mfs {
			if mf.GetName() == "memcached_up" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	g.Expect(collect(file)).To(Equal(1.0), "logged in with the file's first entry")
	g.Expect(collect("")).To(BeZero(), "no credentials: refused, reported as down")

	wrong := dir + "/wrong"
	g.Expect(os.WriteFile(wrong, []byte("scraper:nope\n"), 0o644)).To(Succeed())
	g.Expect(collect(wrong)).To(BeZero())
	g.Expect(collect(dir+"/missing")).To(BeZero(), "an unreadable file is a failed scrape, not a crash")
}

func TestReadAuthFile(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	for content, want := range map[string]exporter.Credentials{
		"a:b\n":                {Username: "a", Password: "b"},
		"\nuser:p:a:ss\r\nx:y": {Username: "user", Password: "p:a:ss"},
		"only:":                {Username: "only"},
	} {
		f := dir + "/f"
		g.Expect(os.WriteFile(f, []byte(content), 0o600)).To(Succeed())
		got, err := exporter.ReadAuthFile(f)
		g.Expect(err).NotTo(HaveOccurred(), content)
		g.Expect(got).To(Equal(want), content)
	}
	for _, content := range []string{"", "\n\n", "nocolon\n", ":pass\n"} {
		f := dir + "/f"
		g.Expect(os.WriteFile(f, []byte(content), 0o600)).To(Succeed())
		_, err := exporter.ReadAuthFile(f)
		g.Expect(err).To(HaveOccurred(), "%q", content)
	}
}

func TestHandlerServesTheExpositionFormat(t *testing.T) {
	g := NewWithT(t)
	s := serve(t, replay(t))
	h := exporter.Handler(exporter.NewCollector(s.addr(), time.Second, slog.New(slog.NewTextHandler(io.Discard, nil))))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	g.Expect(rec.Code).To(Equal(http.StatusOK))
	body := rec.Body.String()
	g.Expect(body).To(ContainSubstring("\nmemcached_up 1\n"))
	g.Expect(body).To(ContainSubstring(`memcached_version{version="1.6.18"} 1`))
	g.Expect(body).To(ContainSubstring("# TYPE memcached_commands_total counter"))
	g.Expect(body).To(ContainSubstring("process_resident_memory_bytes"), "the exporter's own RSS, for the fleet's dashboard")
}

// TestOneScrapeInFlight: while a scrape waits on memcached, another is
// answered 503 at once and opens no second connection; the first then
// completes.
func TestOneScrapeInFlight(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	s := serve(t, func(conn net.Conn) { <-release; replay(t)(conn) })
	srv := httptest.NewServer(exporter.Handler(exporter.NewCollector(s.addr(), 5*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))))
	t.Cleanup(srv.Close)
	first := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL)
		if err != nil {
			first <- 0
			return
		}
		_ = resp.Body.Close()
		first <- resp.StatusCode
	}()
	g.Eventually(s.open.Load).Should(Equal(int64(1)), "the first scrape is connected and waiting")
	resp, err := http.Get(srv.URL)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
	g.Expect(s.served.Load()).To(Equal(int64(1)), "no second connection to memcached")
	close(release)
	g.Eventually(first, 5*time.Second).Should(Receive(Equal(http.StatusOK)))
}
