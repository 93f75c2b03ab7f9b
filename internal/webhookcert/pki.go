// Package webhookcert keeps the admission webhooks' CA and serving
// certificate in one Secret and the CA in both webhook configurations'
// caBundle, so that a chart rendered with `helm template` carries no
// certificate data and every render is the same. Every replica runs it
// without leader election: writes are optimistic, and a replica that loses
// a race re-reads and serves the winner's certificate.
package webhookcert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/example/memcached-operator/internal/pki"
)

// Keys of the Secret's data.
const (
	CACertKey  = "ca.crt"
	CAKeyKey   = "ca.key"
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
)

// keyPair is a parsed certificate with the PEM it came from.
type keyPair = pki.KeyPair

// parseKeyPair accepts only a single certificate whose public key matches
// key: anything else in the Secret is treated as missing.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("no PEM key")
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing key: %w", err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("key does not match certificate")
	}
	return &keyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// skew backdates NotBefore so that an API server whose clock runs a little
// behind already accepts a new certificate; a tenth of the validity, at most
// an hour, so short test validities are not dominated by it.
func skew(validity time.Duration) time.Duration {
	return min(time.Hour, validity/10)
}

func newCA(commonName string, now time.Time, validity time.Duration) (*keyPair, error) {
	return pki.Sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-skew(validity)),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil)
}

// newServing never outlives its CA: a certificate valid past its issuer
// would be refused anyway.
func newServing(ca *keyPair, dnsNames []string, now time.Time, validity time.Duration) (*keyPair, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("no DNS names for the serving certificate")
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	return pki.Sign(&x509.Certificate{
		Subject:               pkix.Name{CommonName: dnsNames[0]},
		DNSNames:              dnsNames,
		NotBefore:             now.Add(-skew(validity)),
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca)
}

// ParseBundle returns the certificates of a PEM bundle, skipping blocks that
// do not parse: a caBundle someone edited must not stop the operator from
// writing a good one.
func ParseBundle(bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, bundle = pem.Decode(bundle)
		if b == nil {
			return out
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

// EncodeBundle is the PEM form of certs, in order.
func EncodeBundle(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}
