package webhookcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var (
	t0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	names  = []string{"svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local"}
	policy = Policy{DNSNames: names, CAValidity: 90 * time.Hour, ServingValidity: 30 * time.Hour, RenewFraction: 1.0 / 3}
)

func fresh(t *testing.T, now time.Time) map[string][]byte {
	t.Helper()
	data, err := Renew(nil, Decision{Action: RenewAll}, now, policy, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func with(data map[string][]byte, k string, v []byte) map[string][]byte {
	out := map[string][]byte{}
	for key, val := range data {
		out[key] = val
	}
	out[k] = v
	return out
}

func TestDecide(t *testing.T) {
	good := fresh(t, t0)
	other := fresh(t, t0)
	narrow := policy
	narrow.DNSNames = names[:1]
	narrowData, err := Renew(good, Decision{Action: RenewServing}, t0, narrow, "test-ca")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data map[string][]byte
		now  time.Time
		want Action
	}{
		{"fresh", good, t0, Keep},
		{"empty", nil, t0, RenewAll},
		{"garbage CA", with(good, CACertKey, []byte("garbage")), t0, RenewAll},
		{"CA key of another CA", with(good, CAKeyKey, other[CAKeyKey]), t0, RenewAll},
		{"serving certificate is no CA", with(with(good, CACertKey, good[TLSCertKey]), CAKeyKey, good[TLSKeyKey]), t0, RenewAll},
		{"serving missing", with(good, TLSCertKey, nil), t0, RenewServing},
		{"serving key of another certificate", with(good, TLSKeyKey, other[TLSKeyKey]), t0, RenewServing},
		{"serving signed by another CA", with(with(good, TLSCertKey, other[TLSCertKey]), TLSKeyKey, other[TLSKeyKey]), t0, RenewServing},
		{"serving misses DNS names", narrowData, t0, RenewServing},
		{"serving with more than a third left", good, t0.Add(19 * time.Hour), Keep},
		{"serving with less than a third left", good, t0.Add(21 * time.Hour), RenewServing},
		{"CA with less than a third left", good, t0.Add(61 * time.Hour), RenewAll},
		{"CA expired", good, t0.Add(91 * time.Hour), RenewAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Decide(tc.data, tc.now, policy).Action).To(Equal(tc.want))
		})
	}
}

func TestRenewKeepsThePreviousCA(t *testing.T) {
	g := NewWithT(t)
	first := fresh(t, t0)
	second, err := Renew(first, Decision{Action: RenewAll}, t0.Add(61*time.Hour), policy, "test-ca")
	g.Expect(err).NotTo(HaveOccurred())
	cas := ParseBundle(second[CACertKey])
	g.Expect(cas).To(HaveLen(2), "the new CA, then the previous one")
	g.Expect(cas[1].Raw).To(Equal(ParseBundle(first[CACertKey])[0].Raw))
	g.Expect(Decide(second, t0.Add(61*time.Hour), policy).Action).To(Equal(Keep))

	third, err := Renew(second, Decision{Action: RenewAll}, t0.Add(122*time.Hour), policy, "test-ca")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ParseBundle(third[CACertKey])).To(HaveLen(2), "never more than one previous CA")
	expired, err := Renew(second, Decision{Action: RenewAll}, t0.Add(300*time.Hour), policy, "test-ca")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ParseBundle(expired[CACertKey])).To(HaveLen(1), "an expired previous CA is not carried")
}

func TestKeysAreP256(t *testing.T) {
	g := NewWithT(t)
	data := fresh(t, t0)
	for _, k := range []string{CACertKey, TLSCertKey} {
		pub, ok := ParseBundle(data[k])[0].PublicKey.(*ecdsa.PublicKey)
		g.Expect(ok).To(BeTrue(), k)
		g.Expect(pub.Curve).To(Equal(elliptic.P256()), k)
	}
}

func TestServingNeverOutlivesItsCA(t *testing.T) {
	g := NewWithT(t)
	data := fresh(t, t0)
	later, err := Renew(data, Decision{Action: RenewServing}, t0.Add(80*time.Hour), policy, "")
	g.Expect(err).NotTo(HaveOccurred())
	leaf := ParseBundle(later[TLSCertKey])[0]
	g.Expect(leaf.NotAfter).To(Equal(ParseBundle(data[CACertKey])[0].NotAfter))
}

func TestNextCheck(t *testing.T) {
	g := NewWithT(t)
	data := fresh(t, t0)
	next := NextCheck(data, policy)
	g.Expect(Decide(data, next.Add(-time.Second), policy).Action).To(Equal(Keep))
	g.Expect(Decide(data, next, policy).Action).To(Equal(RenewServing))
	g.Expect(NextCheck(nil, policy).IsZero()).To(BeTrue(), "garbage needs a pass now")
}

func ca(t *testing.T, at time.Time) *x509.Certificate {
	t.Helper()
	return ParseBundle(fresh(t, at)[CACertKey])[0]
}

func TestBundle(t *testing.T) {
	a, b, c, d, e := ca(t, t0), ca(t, t0.Add(time.Hour)), ca(t, t0.Add(2*time.Hour)), ca(t, t0.Add(3*time.Hour)), ca(t, t0.Add(4*time.Hour))
	leaf := ParseBundle(fresh(t, t0)[TLSCertKey])[0]
	for _, tc := range []struct {
		name            string
		keep, published []*x509.Certificate
		now             time.Time
		want            []*x509.Certificate
	}{
		{"nothing published", []*x509.Certificate{a}, nil, t0, []*x509.Certificate{a}},
		{"already published", []*x509.Certificate{a}, []*x509.Certificate{a, a}, t0, []*x509.Certificate{a}},
		{"previous kept, newest first", []*x509.Certificate{b, a}, nil, t0, []*x509.Certificate{b, a}},
		{"published kept", []*x509.Certificate{b}, []*x509.Certificate{a}, t0, []*x509.Certificate{b, a}},
		{"same bytes whichever is current", []*x509.Certificate{a}, []*x509.Certificate{b}, t0, []*x509.Certificate{b, a}},
		{"expired dropped", []*x509.Certificate{e}, []*x509.Certificate{a}, t0.Add(91 * time.Hour), []*x509.Certificate{e}},
		{"not a CA dropped", []*x509.Certificate{a}, []*x509.Certificate{leaf}, t0, []*x509.Certificate{a}},
		{"capped, the Secret's CAs first", []*x509.Certificate{a, b}, []*x509.Certificate{c, d, e}, t0, []*x509.Certificate{e, d, b, a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(Bundle(tc.keep, tc.published, tc.now)).To(Equal(tc.want))
		})
	}
}
