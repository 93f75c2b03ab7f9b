package authreload

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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

// clientCert is a client certificate for name signed by ca.
func (ca *testCA) clientCert(t *testing.T, name string) tls.Certificate {
	t.Helper()
	return ca.cert2(t, name, x509.ExtKeyUsageClientAuth)
}

// fleetCert is a fleet's own certificate from ca, as the operator asks
// cert-manager for it: server auth only. Another tenant's fleet behind the
// same ClusterIssuer holds one of these.
func (ca *testCA) fleetCert(t *testing.T, name string) tls.Certificate {
	t.Helper()
	return ca.cert2(t, name, x509.ExtKeyUsageServerAuth)
}

func (ca *testCA) cert2(t *testing.T, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(77), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestClientAuthModes holds spec.tls.clientAuth's mapping to memcached's
// ssl_verify_mode against the real memcached: Require (2) refuses a client
// without a certificate of the CA in ssl_ca_cert (the Secret's ca.crt),
// Request (1) admits one without a certificate but refuses one from
// another CA, and None (0) asks for nothing. A fleet's own certificate,
// which is for server auth only, logs in to no other fleet of its CA.
func TestClientAuthModes(t *testing.T) {
	bin := memcachedBinary(t)
	ca, other := newTestCA(t), newTestCA(t)
	const name = testServerName
	for _, tt := range []struct {
		mode                         int
		bare, ours, foreign, sibling bool // whether each client is served
	}{
		{mode: 0, bare: true, ours: true, foreign: true, sibling: true},
		{mode: 1, bare: true, ours: true, foreign: false, sibling: false},
		{mode: 2, bare: false, ours: true, foreign: false, sibling: false},
	} {
		t.Run("ssl_verify_mode="+strconv.Itoa(tt.mode), func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			g.Expect(os.Chmod(dir, 0o755)).To(Succeed())
			g.Expect(os.Chmod(filepath.Dir(dir), 0o755)).To(Succeed())
			crt, key := ca.issue(t, 1)
			caPEM := pemCert(ca.cert)
			secretVolume(t, dir, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": caPEM})
			port := freePort(t)
			opts := "ssl_chain_cert=" + filepath.Join(dir, "tls.crt") + ",ssl_key=" + filepath.Join(dir, "tls.key") + ",ssl_verify_mode=" + strconv.Itoa(tt.mode)
			if tt.mode != 0 {
				opts += ",ssl_ca_cert=" + filepath.Join(dir, "ca.crt")
			}
			args := []string{"-U", "0", "-m", "16", "-p", port, "-Z", "-l", "127.0.0.1:" + port, "-o", opts}
			if os.Geteuid() == 0 {
				args = append(args, "-u", "nobody")
			}
			mc := exec.Command(bin, args...)
			g.Expect(mc.Start()).To(Succeed())
			t.Cleanup(func() { _ = mc.Process.Kill(); _ = mc.Wait() })

			// served tells whether a version command is answered: with TLS
			// 1.3 a refused client certificate shows on the first read.
			served := func(certs ...tls.Certificate) bool {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", "127.0.0.1:"+port,
					&tls.Config{RootCAs: ca.pool, ServerName: name, Certificates: certs, MinVersion: tls.VersionTLS12})
				if err != nil {
					return false
				}
				defer func() { _ = conn.Close() }()
				_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
				if _, err := conn.Write([]byte("version\r\n")); err != nil {
					return false
				}
				buf := make([]byte, 64)
				n, _ := conn.Read(buf)
				return n > 0 && string(buf[:7]) == "VERSION"
			}
			g.Eventually(func() bool { return served(ca.clientCert(t, "app")) }).Should(BeTrue(), "memcached up, serving a client of its CA")
			g.Expect(served()).To(Equal(tt.bare), "a client without a certificate")
			g.Expect(served(other.clientCert(t, "intruder"))).To(Equal(tt.foreign), "a client with another CA's certificate")
			g.Expect(served(ca.fleetCert(t, "tenant-b"))).To(Equal(tt.sibling), "another fleet's certificate from the same CA, a shared ClusterIssuer's")
		})
	}
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
