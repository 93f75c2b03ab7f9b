package pki_test

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/example/memcached-operator/internal/pki"
)

// TestSign: a CA signs a leaf that verifies against it and only against
// it; serials are not reused.
func TestSign(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	caTmpl := func() *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: "ca"}, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	ca, err := pki.Sign(caTmpl(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	other, err := pki.Sign(caTmpl(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ca.Cert.SerialNumber).NotTo(Equal(other.Cert.SerialNumber))
	leaf, err := pki.Sign(&x509.Certificate{Subject: pkix.Name{CommonName: "svc"}, DNSNames: []string{"svc.ns.svc"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca)
	g.Expect(err).NotTo(HaveOccurred())
	verify := func(root *pki.KeyPair) error {
		pool := x509.NewCertPool()
		pool.AddCert(root.Cert)
		_, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "svc.ns.svc"})
		return err
	}
	g.Expect(verify(ca)).To(Succeed())
	g.Expect(verify(other)).NotTo(Succeed())
	g.Expect(string(leaf.CertPEM)).To(HavePrefix("-----BEGIN CERTIFICATE-----"))
	g.Expect(string(leaf.KeyPEM)).To(HavePrefix("-----BEGIN EC PRIVATE KEY-----"))
}
