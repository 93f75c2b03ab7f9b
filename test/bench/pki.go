package main

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/example/memcached-operator/internal/pki"
)

// keyPair is a certificate and its key, PEM encoded.
type keyPair = pki.KeyPair

// certValidity covers any bench run; the PKI is remade on every cluster-up.
const certValidity = 7 * 24 * time.Hour

// newCA makes a self-signed certificate authority.
func newCA(name string) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, nil)
}

// newServing makes a serving certificate for loopback, signed by ca (or
// self-signed when ca is nil).
func newServing(ca *keyPair, name string, dnsNames []string, ips ...net.IP) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
	}
	if ca == nil {
		// A self-signed leaf must also be its own issuer for clients that
		// pin it as the only CA (caBundle).
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	return sign(tmpl, ca)
}

// newClientCert makes a client certificate: the API server takes the common
// name as the user and the organizations as its groups.
func newClientCert(ca *keyPair, user string, groups ...string) (*keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return sign(tmpl, ca)
}

func sign(tmpl *x509.Certificate, ca *keyPair) (*keyPair, error) {
	tmpl.NotBefore = time.Now().Add(-time.Minute)
	tmpl.NotAfter = time.Now().Add(certValidity)
	return pki.Sign(tmpl, ca)
}

// writePair stores the pair as dir/name.crt and dir/name.key.
func writePair(k *keyPair, dir, name string) error {
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), k.CertPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), k.KeyPEM, 0o600)
}
