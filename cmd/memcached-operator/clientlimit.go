package main

import (
	"fmt"
	"math"

	"k8s.io/client-go/rest"
)

// clientRateLimit sets the client-side limit of requests to the API server.
// Without one (qps 0) the operator keeps controller-runtime's choice: no
// client-side limit, the API server's priority and fairness deciding. The
// bench measured what a limit costs (-sweep-qps) before anyone sets one.
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
	return nil
}
