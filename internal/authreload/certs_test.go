package authreload

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// testCA signs server certificates for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// testServerName is the name the test servers' certificates are for.
const testServerName = "cache.ns.svc"

// issue returns a PEM server certificate and key for testServerName with the
// given serial.
func (ca *testCA) issue(t *testing.T, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: testServerName}, DNSNames: []string{testServerName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// secretVolume writes files the way the kubelet does a Secret volume's: into
// a fresh directory, then one atomic swap of the ..data symlink that the
// visible names point through, so a reader never sees a new certificate
// with an old key.
func secretVolume(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	gen, err := os.MkdirTemp(dir, "..gen")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(gen, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestRefreshesRealMemcachedCertificate renews the certificate of Debian's
// memcached (the image's) running TLS on loopback, the way the pods run it,
// without restarting it: the refresher sees the Secret volume's files
// change, sends refresh_certs over the loopback listener without TLS
// (logged in when memcached has an auth file), and a new TLS connection is
// served the new certificate. The old connections and the cache stay.
func TestRefreshesRealMemcachedCertificate(t *testing.T) {
	bin := memcachedBinary(t)
	for _, withAuth := range []bool{false, true} {
		t.Run("auth="+strconv.FormatBool(withAuth), func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			// memcached drops to nobody when the tests run as root: it must read the files.
			g.Expect(os.Chmod(dir, 0o755)).To(Succeed())
			g.Expect(os.Chmod(filepath.Dir(dir), 0o755)).To(Succeed())
			ca := newTestCA(t)
			const name = testServerName
			crt, key := ca.issue(t, 1001)
			secretVolume(t, dir, map[string][]byte{"tls.crt": crt, "tls.key": key})
			tlsPort, plainPort := freePort(t), freePort(t)
			args := []string{"-U", "0", "-m", "16", "-p", tlsPort,
				"-Z", "-l", "127.0.0.1:" + tlsPort + ",notls:127.0.0.1:" + plainPort,
				"-o", "ssl_chain_cert=" + filepath.Join(dir, "tls.crt") + ",ssl_key=" + filepath.Join(dir, "tls.key") + ",ssl_verify_mode=0"}
			authFile := ""
			if withAuth {
				authFile = filepath.Join(dir, "auth-file")
				g.Expect(os.WriteFile(authFile, []byte("app:secret\n"), 0o644)).To(Succeed())
				args = append(args, "-Y", authFile)
			}
			if os.Geteuid() == 0 {
				args = append(args, "-u", "nobody")
			}
			mc := exec.Command(bin, args...)
			mc.Stderr = os.Stderr
			g.Expect(mc.Start()).To(Succeed())
			t.Cleanup(func() { _ = mc.Process.Kill(); _ = mc.Wait() })

			served := func() (int64, error) {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", "127.0.0.1:"+tlsPort, &tls.Config{RootCAs: ca.pool, ServerName: name, MinVersion: tls.VersionTLS12})
				if err != nil {
					return 0, err
				}
				defer func() { _ = conn.Close() }()
				return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
			}
			g.Eventually(served).Should(Equal(int64(1001)))
			user := ""
			if withAuth {
				user = "app"
			}
			kept := keepsItsCache(t, g, "127.0.0.1:"+plainPort, user, "secret")

			// TLS 1.2 at least: an older client is refused (memcached's own
			// ssl_min_version default, and the image's OpenSSL, which refuses
			// TLS 1.1 even when memcached is told to allow it).
			_, old := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", "127.0.0.1:"+tlsPort,
				&tls.Config{RootCAs: ca.pool, ServerName: name, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}) //nolint:gosec // the refusal is what is tested
			g.Expect(old).To(HaveOccurred(), "a TLS 1.1 handshake")

			// A connection open across the refresh keeps its certificate and keeps serving.
			held, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", "127.0.0.1:"+tlsPort, &tls.Config{RootCAs: ca.pool, ServerName: name, MinVersion: tls.VersionTLS12})
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = held.Close() }()
			heldReader := bufio.NewReader(held)
			if withAuth {
				_ = held.SetDeadline(time.Now().Add(2 * time.Second))
				_, _ = held.Write([]byte("set auth 0 0 10\r\napp secret\r\n"))
				g.Expect(heldReader.ReadString('\n')).To(Equal("STORED\r\n"))
			}
			heldVersion := func() string {
				_ = held.SetDeadline(time.Now().Add(2 * time.Second))
				_, _ = held.Write([]byte("version\r\n"))
				line, _ := heldReader.ReadString('\n')
				return line
			}
			g.Expect(heldVersion()).To(HavePrefix("VERSION "))

			// A plain-text client on the TLS port gets no answer.
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+tlsPort, time.Second)
			g.Expect(err).NotTo(HaveOccurred())
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, _ = conn.Write([]byte("version\r\n"))
			answer, _ := io.ReadAll(conn)
			_ = conn.Close()
			g.Expect(string(answer)).NotTo(ContainSubstring("VERSION"), "the TLS port must not answer plain memcached")

			r := &CertRefresher{
				Files: []string{filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")}, Address: "127.0.0.1:" + plainPort,
				AuthFile: authFile, Interval: 50 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})

			if withAuth {
				g.Expect((&CertRefresher{Address: r.Address}).Refresh()).To(HaveOccurred(), "memcached refuses refresh_certs before a login")
			}

			crt2, key2 := ca.issue(t, 1002)
			secretVolume(t, dir, map[string][]byte{"tls.crt": crt2, "tls.key": key2})
			began := time.Now()
			g.Eventually(served).WithTimeout(5 * time.Second).WithPolling(20 * time.Millisecond).Should(Equal(int64(1002)))
			t.Logf("new certificate served %s after the files changed", time.Since(began).Round(time.Millisecond))
			kept(user, "secret")
			g.Expect(heldVersion()).To(HavePrefix("VERSION "), "the connection opened before the refresh still serves")
			g.Expect(held.ConnectionState().PeerCertificates[0].SerialNumber.Int64()).To(Equal(int64(1001)), "with the certificate it was opened with")

			// A key that does not match the certificate is refused by
			// memcached, which keeps serving the certificate it had.
			_, key3 := ca.issue(t, 1003)
			g.Expect(os.WriteFile(filepath.Join(dir, "..data", "tls.key"), key3, 0o644)).To(Succeed())
			g.Expect(r.Refresh()).To(MatchError(ContainSubstring("did not reload")))
			g.Expect(served()).To(Equal(int64(1002)))
		})
	}
}

// TestRefreshNeedsMemcached fails when nothing listens, which Run retries.
func TestRefreshNeedsMemcached(t *testing.T) {
	g := NewWithT(t)
	r := &CertRefresher{Address: "127.0.0.1:" + freePort(t), Timeout: time.Second}
	g.Expect(r.Refresh()).To(MatchError(ContainSubstring("connecting to memcached")))
}
