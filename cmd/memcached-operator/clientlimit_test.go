package main

import (
	"math"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// rateLimitCase is a pair of flags and the config they give.
type rateLimitCase struct {
	name         string
	qps          float64
	burst        int
	wantQPS      float32
	wantBurst    int
	wantErrorHas string
}

func TestClientRateLimit(t *testing.T) {
	for _, tc := range []rateLimitCase{
		{name: "default keeps controller-runtime's no limit", wantQPS: -1},
		{name: "qps with burst", qps: 50, burst: 80, wantQPS: 50, wantBurst: 80},
		{name: "qps alone bursts a second's worth", qps: 50, wantQPS: 50, wantBurst: 50},
		{name: "a fractional qps rounds its burst up", qps: 20.5, wantQPS: 20.5, wantBurst: 21},
		{name: "a small qps bursts client-go's 10", qps: 0.5, wantQPS: 0.5, wantBurst: 10},
		{name: "burst without qps", burst: 10, wantQPS: -1, wantErrorHas: "needs --kube-api-qps"},
		{name: "negative qps", qps: -1, wantQPS: -1, wantErrorHas: "--kube-api-qps must be"},
		{name: "NaN qps", qps: math.NaN(), wantQPS: -1, wantErrorHas: "--kube-api-qps must be"},
		{name: "infinite qps", qps: math.Inf(1), wantQPS: -1, wantErrorHas: "--kube-api-qps must be"},
		{name: "negative burst", qps: 5, burst: -1, wantQPS: -1, wantErrorHas: "--kube-api-burst must not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			// As ctrl.GetConfig returns it.
			cfg := &rest.Config{QPS: -1}
			err := clientRateLimit(cfg, tc.qps, tc.burst)
			if tc.wantErrorHas != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErrorHas)))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(cfg.QPS).To(Equal(tc.wantQPS))
			g.Expect(cfg.Burst).To(Equal(tc.wantBurst))
			if tc.wantQPS <= 0 {
				g.Expect(cfg.RateLimiter).To(BeNil(), "no limiter: controller-runtime's no limit")
				return
			}
			g.Expect(cfg.RateLimiter).NotTo(BeNil())
			g.Expect(cfg.RateLimiter.QPS()).To(Equal(tc.wantQPS))
		})
	}
}

// One limiter for the process: the REST clients controller-runtime makes for
// each kind, from copies of the config, all take their tokens from it.
func TestClientRateLimitIsSharedByEveryClient(t *testing.T) {
	g := NewWithT(t)
	cfg := &rest.Config{QPS: -1, Host: "https://127.0.0.1:6443"}
	g.Expect(clientRateLimit(cfg, 5, 2)).To(Succeed())
	var clients []*rest.RESTClient
	for _, gv := range []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}} {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
		rc, err := rest.RESTClientFor(c)
		g.Expect(err).NotTo(HaveOccurred())
		clients = append(clients, rc)
	}
	for _, rc := range clients {
		g.Expect(rc.GetRateLimiter()).To(BeIdenticalTo(cfg.RateLimiter))
	}
	// The burst of 2 spent by two clients leaves none for either.
	g.Expect(clients[0].GetRateLimiter().TryAccept()).To(BeTrue())
	g.Expect(clients[1].GetRateLimiter().TryAccept()).To(BeTrue())
	g.Expect(clients[0].GetRateLimiter().TryAccept()).To(BeFalse())
}
