package main

import (
	"math"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

func TestClientRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name         string
		qps          float64
		burst        int
		wantQPS      float32
		wantBurst    int
		wantErrorHas string
	}{
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
		})
	}
}
