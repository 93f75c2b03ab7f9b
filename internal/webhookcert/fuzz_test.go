package webhookcert

import (
	"crypto/x509"
	"testing"
	"time"
)

// FuzzPasses drives the pure half of Sync through a history of clock jumps,
// garbage edits of the Secret, CAs published by something else (an older
// operator's replica that lost the race, a hand edit),
// and changed DNS names, and checks after every pass that the bundle trusts
// the served certificate, holds no expired CA, stays bounded, and still
// trusts the certificate served before the pass (no admission failure during
// a rotation).
func FuzzPasses(f *testing.F) {
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{40, 40, 40, 40, 40, 40}) // a year of rotations
	f.Add([]byte{1, 2, 2, 2, 2, 1, 1})    // garbage and races
	f.Add([]byte{3, 60, 2, 2, 1, 200, 3}) // names change, long sleeps
	f.Fuzz(func(t *testing.T, history []byte) {
		if len(history) > 24 {
			history = history[:24]
		}
		p := policy
		now := t0
		var data map[string][]byte
		var published []*x509.Certificate
		var served *x509.Certificate
		pass := func() {
			if d := Decide(data, now, p); d.Action != Keep {
				next, err := Renew(data, d, now, p, "ca")
				if err != nil {
					t.Fatal(err)
				}
				data = next
			}
			published = Bundle(ParseBundle(data[CACertKey]), published, now)
		}
		pass()
		served = ParseBundle(data[TLSCertKey])[0]
		for _, op := range history {
			garbage := false
			switch op % 4 {
			case 0: // time passes: up to ~1.4 CA lifetimes
				now = now.Add(time.Duration(op) * p.CAValidity / 180)
			case 1:
				// Everything lost: only the published bundle remembers the CA
				// replicas still serve from.
				data = map[string][]byte{CACertKey: []byte("garbage")}
				garbage = true
			case 2: // a stray CA, whose key is nowhere, appears in the bundle
				racer, err := Renew(nil, Decision{Action: RenewAll}, now, p, "ca")
				if err != nil {
					t.Fatal(err)
				}
				published = Bundle(ParseBundle(racer[CACertKey]), published, now)
			case 3:
				p.DNSNames = append(p.DNSNames[:len(p.DNSNames):len(p.DNSNames)], "extra.example")
			}
			before := len(published)
			pass()
			leaf := ParseBundle(data[TLSCertKey])[0]
			if !Trusts(published, leaf) {
				t.Fatalf("bundle does not trust the served certificate")
			}
			if len(published) > MaxBundleCAs {
				t.Fatalf("bundle grew to %d", len(published))
			}
			for _, c := range published {
				if !now.Before(c.NotAfter) && !c.Equal(ParseBundle(data[CACertKey])[0]) {
					t.Fatalf("expired CA kept")
				}
			}
			// Replicas still serving the previous certificate keep working,
			// unless it expired, or garbage lost the Secret's memory of its
			// CA while the bundle was full of newer ones.
			if now.Before(served.NotAfter) && (!garbage || before < MaxBundleCAs) && !Trusts(published, served) {
				t.Fatalf("the previously served certificate lost its CA (op %d)", op)
			}
			if d := Decide(data, now, p); d.Action != Keep {
				t.Fatalf("a pass left work: %s", d.Reason)
			}
			served = leaf
		}
	})
}
