package main

import (
	"fmt"
	"math"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// clientRateLimit sets the client-side limit of requests to the API server.
// Without one (qps 0) the operator keeps controller-runtime's choice: no
// client-side limit, the API server's priority and fairness deciding. The
// bench's -sweep-qps measures what a limit costs.
//
// The limiter is set on the config, not only QPS and Burst: every REST client
// made from a copy of the config then shares it, so the limit is the
// process's. With QPS alone controller-runtime's client, which makes a REST
// client for each kind, would allow that many requests a second per kind.
func clientRateLimit(cfg *rest.Config, qps float64, burst int) error {
	switch {
	case qps < 0 || math.IsNaN(qps) || math.IsInf(qps, 0):
		return fmt.Errorf("--kube-api-qps must be 0 (no client-side limit) or a positive number, not %v", qps)
	case burst < 0:
		return fmt.Errorf("--kube-api-burst must not be negative, not %d", burst)
	case qps == 0 && burst > 0:
		return fmt.Errorf("--kube-api-burst=%d needs --kube-api-qps: without it there is no limit to burst above", burst)
	case qps == 0:
		return nil
	}
	cfg.QPS = float32(qps)
	if burst == 0 {
		// A second's worth, and never below client-go's own default of 10
		// (a burst under 1 would let no request through).
		burst = max(10, int(math.Ceil(qps)))
	}
	cfg.Burst = burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, burst)
	return nil
}
