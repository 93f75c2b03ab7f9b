package webhookcert

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
)

func TestServeWaitsForANewCAToPropagate(t *testing.T) {
	g := NewWithT(t)
	r := &Rotator{opts: Options{TrustPropagation: 5 * time.Second}, trustedSince: map[string]time.Time{}, log: logr.Discard()}
	first := fresh(t, t0)
	at, err := r.serve(first, false, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at.IsZero()).To(BeTrue())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(first[TLSCertKey])[0].Raw), "nothing served yet: load at once")

	renewed, err := Renew(first, Decision{Action: RenewServing}, t0, policy, "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = r.serve(renewed, false, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(renewed[TLSCertKey])[0].Raw), "same CA: at once")

	newCA := fresh(t, t0)
	_, err = r.serve(newCA, false, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(renewed[TLSCertKey])[0].Raw), "new CA not published: keep serving")
	at, err = r.serve(newCA, true, t0.Add(time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at).To(Equal(t0.Add(6 * time.Second)))
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(renewed[TLSCertKey])[0].Raw), "published a moment ago: keep serving")
	_, err = r.serve(newCA, true, t0.Add(5*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(renewed[TLSCertKey])[0].Raw))
	_, err = r.serve(newCA, true, t0.Add(6*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(newCA[TLSCertKey])[0].Raw), "after TrustPropagation")
}
