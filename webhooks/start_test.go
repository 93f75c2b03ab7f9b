package webhooks_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/exporter"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/test/memcachedbin"
)

// realMemcached starts Debian's memcached, the image's, with the command
// line a fleet's pod would run, moved onto loopback: the files the pod
// mounts are written to a folder of its own, and every port the pod listens
// on (memcached's and the exporter's) becomes a free loopback port, the same
// free port for the same number, so two listeners on one port collide here
// as in the pod. It runs as an unprivileged user, as the pod's memcached,
// under the process's open-file limit, which stands in for the container's
// (a container runtime sets that one; raising this one would need
// CAP_SYS_RESOURCE, which the testbed's machines lack).
type realMemcached struct {
	bin, dir string
	// openFiles is the hard open-file limit memcached starts under: specs
	// whose maxConnections exceed it are not started (unchecked).
	openFiles uint64
}

// newRealMemcached finds memcached, failing in CI (CI=true) when it is
// missing, and writes the files a pod mounts: an auth file and a
// certificate, key and CA.
func newRealMemcached() *realMemcached {
	GinkgoHelper()
	bin := memcachedbin.Path(GinkgoT())
	dir := GinkgoT().TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		Expect(os.Chmod(d, 0o755)).To(Succeed())
	}
	Expect(os.WriteFile(filepath.Join(dir, "auth-file"), []byte("app:secret\n"), 0o644)).To(Succeed())
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "memcached"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o644)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "ca.crt"), cert, 0o644)).To(Succeed())
	Expect(os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o644)).To(Succeed())
	var lim syscall.Rlimit
	Expect(syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)).To(Succeed())
	return &realMemcached{bin: bin, dir: dir, openFiles: lim.Max}
}

// freePort is a loopback port nothing listens on.
func freePort() int {
	GinkgoHelper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port
}

// checks reports whether the harness can start spec's command line: its
// maxConnections fits under the open-file limit.
func (m *realMemcached) checks(spec *cachev1alpha1.MemcachedSpec) bool {
	return uint64(*spec.MaxConnections) <= m.openFiles
}

// starts runs the pod's command line for spec and reports whether memcached
// came up and answered version on its plain-text port (the TLS loopback
// listener for a TLS fleet), and what it said when it did not.
func (m *realMemcached) starts(spec *cachev1alpha1.MemcachedSpec) (bool, string) {
	GinkgoHelper()
	ports, taken := map[int]int{}, map[int]bool{}
	port := func(n int) int {
		// Distinct numbers get distinct ports: a port just closed can be
		// handed out again.
		for ports[n] == 0 {
			if p := freePort(); !taken[p] {
				ports[n], taken[p] = p, true
			}
		}
		return ports[n]
	}
	if policy.ExporterEnabled(spec) {
		// The exporter sidecar holds its port in the pod's network namespace.
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port(exporter.DefaultPort)))
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = ln.Close() }()
	}
	args := m.loopback(desired.Args(spec), port)
	if policy.WarmRestartEnabled(spec) {
		// The memory file, on a memory-backed folder as in the pod, one
		// for each start: memcached touches a page of every slab class.
		dir, err := os.MkdirTemp("/dev/shm", "memcached-warm-")
		Expect(err).NotTo(HaveOccurred())
		Expect(os.Chmod(dir, 0o777)).To(Succeed())
		defer func() { _ = os.RemoveAll(dir) }()
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "/var/lib/memcached/", dir+"/")
		}
	}
	probe := port(int(*spec.Port))
	if policy.TLSEnabled(spec) {
		probe = port(int(policy.TLSLoopbackPort))
	}
	cmd := exec.Command(m.bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if os.Geteuid() == 0 {
		// Without root's powers, as the pod's memcached runs.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	Expect(cmd.Start()).To(Succeed())
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-exited:
			return false, fmt.Sprintf("exited (%v): %s; args %q", waitErr, strings.TrimSpace(out.String()), args)
		case <-deadline:
			return false, fmt.Sprintf("no answer in 5 s; args %q", args)
		case <-time.After(10 * time.Millisecond):
		}
		if ok, answer := m.version(probe, spec.Auth != nil); ok {
			return true, answer
		}
	}
}

// loopback rewrites the pod's command line: its listeners onto 127.0.0.1
// and free ports, its mounted files into the folder.
func (m *realMemcached) loopback(args []string, port func(int) int) []string {
	out := make([]string, 0, len(args)+2)
	listen := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-p" && i+1 < len(args):
			n, _ := strconv.Atoi(args[i+1])
			out = append(out, "-p", strconv.Itoa(port(n)))
			i++
			continue
		case a == "-l" && i+1 < len(args):
			var addrs []string
			for _, l := range strings.Split(args[i+1], ",") {
				prefix, hostPort := "", l
				if p, rest, ok := strings.Cut(l, "notls:"); ok && p == "" {
					prefix, hostPort = "notls:", rest
				}
				_, ps, _ := strings.Cut(hostPort, ":")
				n, _ := strconv.Atoi(ps)
				addrs = append(addrs, prefix+"127.0.0.1:"+strconv.Itoa(port(n)))
			}
			out = append(out, "-l", strings.Join(addrs, ","))
			listen = true
			i++
			continue
		}
		a = strings.ReplaceAll(a, "/etc/memcached/auth/", m.dir+"/")
		a = strings.ReplaceAll(a, "/etc/memcached/tls/", m.dir+"/")
		out = append(out, a)
	}
	if !listen {
		out = append(out, "-l", "127.0.0.1")
	}
	return out
}

// version asks memcached for its version on port, logging in first when the
// fleet has auth; any answer but VERSION is a failure.
func (m *realMemcached) version(port int, auth bool) (bool, string) {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return false, err.Error()
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	r := bufio.NewReader(conn)
	if auth {
		if _, err := fmt.Fprintf(conn, "set auth 0 0 10\r\napp secret\r\n"); err != nil {
			return false, err.Error()
		}
		if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "STORED" {
			return false, "login: " + line
		}
	}
	if _, err := fmt.Fprintf(conn, "version\r\n"); err != nil {
		return false, err.Error()
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return false, err.Error()
	}
	return strings.HasPrefix(line, "VERSION "), strings.TrimSpace(line)
}

var _ = Describe("The real memcached harness", func() {
	It("starts the sample's command line, and tells one memcached refuses", func() {
		m := newRealMemcached()
		spec := policy.Resolve(&cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}, policy.Config{DefaultImage: defaultImage, ExporterImage: exporterImage})
		ok, why := m.starts(spec)
		Expect(ok).To(BeTrue(), why)
		Expect(why).To(HavePrefix("VERSION 1.6"))
		By("a port the exporter holds")
		withExporter := spec.DeepCopy()
		withExporter.Port = ptr.To[int32](9150)
		withExporter.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		ok, why = m.starts(withExporter)
		Expect(ok).To(BeFalse(), "memcached on the exporter's port: %s", why)
		By("ASCII auth with the binary protocol")
		withAuth := spec.DeepCopy()
		withAuth.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}}
		ok, why = m.starts(withAuth)
		Expect(ok).To(BeTrue(), why)
		withAuth.ExtraArgs = []string{"-B", "binary"}
		ok, why = m.starts(withAuth)
		Expect(ok).To(BeFalse(), "auth with -B binary: %s", why)
	})
})

var _ = Describe("memcached's -o sub-options the rules allow", func() {
	It("each start the real memcached; an unknown one does not", func() {
		m := newRealMemcached()
		values := map[string]string{
			"hashpower": "16", "tail_repair_time": "30", "hash_algorithm": "murmur3", "lru_crawler_sleep": "100", "lru_crawler_tocrawl": "0",
			"read_buf_mem_limit": "0", "hot_lru_pct": "20", "warm_lru_pct": "40", "hot_max_factor": "0.2", "warm_max_factor": "2.0",
			"temporary_ttl": "61", "idle_timeout": "0", "watcher_logbuf_size": "256", "worker_logbuf_size": "64", "slab_automove": "1",
			"slab_automove_ratio": "0.8", "slab_automove_window": "30", "slab_automove_freeratio": "0.01", "sock_cookie_id": "1",
		}
		for _, key := range policy.ExtendedOptions() {
			sub := key
			if v, ok := values[key]; ok {
				sub += "=" + v
			}
			mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), ExtraArgs: []string{"-o", sub}}}
			Expect(policy.Validate(mc)).To(BeEmpty(), sub)
			ok, why := m.starts(policy.Resolve(&mc.Spec, policy.Config{DefaultImage: defaultImage}))
			Expect(ok).To(BeTrue(), "-o %s: %s", sub, why)
		}
		spec := policy.Resolve(&cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), ExtraArgs: []string{"-o", "no_such_option"}}, policy.Config{DefaultImage: defaultImage})
		ok, why := m.starts(spec)
		Expect(ok).To(BeFalse(), "an unknown sub-option: %s", why)
	})
})
