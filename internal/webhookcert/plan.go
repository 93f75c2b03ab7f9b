package webhookcert

import (
	"bytes"
	"crypto/x509"
	"slices"
	"time"
)

// MaxBundleCAs bounds the caBundle: the Secret's CAs (the current one and
// the previous one, which replicas may still serve a certificate of) and
// room for CAs minted by a replica that lost a race or published before a
// Secret was regenerated from garbage.
const MaxBundleCAs = 4

// Action is what a pass must do to the Secret.
type Action int

const (
	// Keep leaves the Secret as it is.
	Keep Action = iota
	// RenewServing issues a new serving certificate from the stored CA.
	RenewServing
	// RenewAll generates a new CA and serving certificate.
	RenewAll
)

func (a Action) String() string {
	return [...]string{"Keep", "RenewServing", "RenewAll"}[a]
}

// Decision is an Action and why, for the log.
type Decision struct {
	Action Action
	Reason string
}

// Policy says what a good Secret looks like.
type Policy struct {
	// DNSNames the serving certificate must cover.
	DNSNames []string
	// CAValidity and ServingValidity are the lifetimes of new certificates.
	CAValidity, ServingValidity time.Duration
	// RenewFraction: a certificate is renewed once less than this fraction
	// of its lifetime remains.
	RenewFraction float64
}

// dueAt is when cert should be renewed.
func (p Policy) dueAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotAfter.Add(-time.Duration(float64(life) * p.RenewFraction))
}

// Decide is what the Secret's data needs at now. The CA is checked first:
// a CA that is missing, unreadable or due makes everything new; otherwise a
// serving certificate that is missing, due, not signed by the CA or not
// covering every DNS name is reissued from it.
func Decide(data map[string][]byte, now time.Time, p Policy) Decision {
	ca, err := parseKeyPair(data[CACertKey], data[CAKeyKey])
	switch {
	case err != nil:
		return Decision{RenewAll, "CA missing or unreadable: " + err.Error()}
	case !ca.Cert.IsCA:
		return Decision{RenewAll, "CA certificate is not a CA"}
	case !now.Before(p.dueAt(ca.Cert)):
		return Decision{RenewAll, "CA due for renewal"}
	}
	serving, err := parseKeyPair(data[TLSCertKey], data[TLSKeyKey])
	switch {
	case err != nil:
		return Decision{RenewServing, "serving certificate missing or unreadable: " + err.Error()}
	case serving.Cert.CheckSignatureFrom(ca.Cert) != nil:
		return Decision{RenewServing, "serving certificate not signed by the CA"}
	case !covers(serving.Cert, p.DNSNames):
		return Decision{RenewServing, "serving certificate does not cover every DNS name"}
	case !now.Before(p.dueAt(serving.Cert)):
		return Decision{RenewServing, "serving certificate due for renewal"}
	}
	return Decision{Keep, "up to date"}
}

func covers(cert *x509.Certificate, names []string) bool {
	for _, n := range names {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	return true
}

// NextCheck is when data next needs a pass, if nothing else changes.
func NextCheck(data map[string][]byte, p Policy) time.Time {
	ca, err := parseKeyPair(data[CACertKey], data[CAKeyKey])
	if err != nil {
		return time.Time{}
	}
	next := p.dueAt(ca.Cert)
	if s, err := parseKeyPair(data[TLSCertKey], data[TLSKeyKey]); err == nil && p.dueAt(s.Cert).Before(next) {
		next = p.dueAt(s.Cert)
	}
	return next
}

// Bundle is the caBundle every webhook should carry: the Secret's unexpired
// CAs (keep, the current one first, always kept), then the newest unexpired
// CAs already published, because a replica may still serve a certificate one
// of them signed, up to MaxBundleCAs. Expired CAs and certificates that are
// not CAs are dropped. The order depends only on the set (newest first), so
// replicas that read the Secret at different times agree on the bytes and
// never undo each other's writes.
func Bundle(keep, published []*x509.Certificate, now time.Time) []*x509.Certificate {
	var out []*x509.Certificate
	add := func(c *x509.Certificate) {
		if c.IsCA && now.Before(c.NotAfter) && len(out) < MaxBundleCAs && !slices.ContainsFunc(out, c.Equal) {
			out = append(out, c)
		}
	}
	if len(keep) > 0 {
		// The current CA even if it were expired: a Secret's CA is never due
		// only after it expired, and the bundle must trust what is served.
		out = append(out, keep[0])
		for _, c := range keep[1:] {
			add(c)
		}
	}
	others := slices.Clone(published)
	slices.SortStableFunc(others, newestFirst)
	for _, c := range others {
		add(c)
	}
	slices.SortFunc(out, newestFirst)
	return out
}

func newestFirst(a, b *x509.Certificate) int {
	if d := b.NotBefore.Compare(a.NotBefore); d != 0 {
		return d
	}
	return bytes.Compare(a.Raw, b.Raw)
}

// Trusts is whether bundle holds a CA that signed leaf: what the API server
// needs to call a webhook serving leaf.
func Trusts(bundle []*x509.Certificate, leaf *x509.Certificate) bool {
	return slices.ContainsFunc(bundle, func(ca *x509.Certificate) bool { return leaf.CheckSignatureFrom(ca) == nil })
}

// Renew returns the Secret data after d: a new serving certificate from the
// stored CA, or a new CA named caName and a serving certificate from it.
func Renew(data map[string][]byte, d Decision, now time.Time, p Policy, caName string) (map[string][]byte, error) {
	var ca *keyPair
	var err error
	if d.Action == RenewServing {
		ca, err = parseKeyPair(data[CACertKey], data[CAKeyKey])
	} else {
		ca, err = newCA(caName, now, p.CAValidity)
	}
	if err != nil {
		return nil, err
	}
	serving, err := newServing(ca, p.DNSNames, now, p.ServingValidity)
	if err != nil {
		return nil, err
	}
	caCerts := ca.CertPEM
	if d.Action == RenewAll {
		// The previous CA stays in the Secret while it is valid: replicas
		// may still serve a certificate it signed, so every pass keeps it in
		// the caBundle.
		if old := ParseBundle(data[CACertKey]); len(old) > 0 && old[0].IsCA && now.Before(old[0].NotAfter) {
			caCerts = append(slices.Clone(caCerts), EncodeBundle(old[:1])...)
		}
	}
	return map[string][]byte{
		CACertKey: caCerts, CAKeyKey: ca.KeyPEM,
		TLSCertKey: serving.CertPEM, TLSKeyKey: serving.KeyPEM,
	}, nil
}
