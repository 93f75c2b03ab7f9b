package apply

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The apply machinery's metrics: how often an owned object needed a write.
var (
	applyRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_apply_requests_total",
		Help: "Server-side applies of owned objects, by kind and result: sent, skipped because the object already matched (the zero-write property, visible in production), or waited because the cache had not yet shown an object this process created.",
	}, []string{"kind", "result"})
	extractions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_apply_extractions_total",
		Help: "Extractions of the operator's own fields from an owned object, by kind and by whom: the cache, as each new version of the object reaches it, or a pass, over an object read whole (none in a running operator).",
	}, []string{"kind", "by"})
)

// Who extracted, as memcached_operator_apply_extractions_total counts them.
const (
	extractedByCache = "cache"
	extractedByPass  = "pass"
)

// Results of an apply, as memcached_operator_apply_requests_total counts them.
const (
	applySent    = "sent"
	applySkipped = "skipped"
	applyWaited  = "waited"
)

// Collectors are the apply machinery's metrics, for the operator's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{applyRequests, extractions}
}
