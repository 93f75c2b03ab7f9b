package desired

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/exporter"
)

// ServiceMonitorGVK is prometheus-operator's ServiceMonitor. The operator
// does not depend on its CRDs: it asks the RESTMapper whether the API is
// served when a fleet wants one, so it starts without them and notices when
// they are installed later.
var ServiceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// scrapeTimeout bounds a scrape of the exporter, whose own is a second.
const scrapeTimeout = "5s"

// ServiceMonitor is the fleet's ServiceMonitor: it selects the fleet's
// Service and scrapes the exporter's metrics port.
func ServiceMonitor(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *unstructured.Unstructured {
	sm := spec.Monitoring.ServiceMonitor
	endpoint := map[string]any{"port": metricsPortName, "path": "/metrics"}
	if iv := ptr.Deref(sm.Interval, ""); iv != "" {
		// The interval is at least 10 s (the CRD's rule), so the timeout
		// fits in it; without one, Prometheus' own applies to both.
		endpoint["interval"] = iv
		if iv != "0" {
			endpoint["scrapeTimeout"] = scrapeTimeout
		}
	}
	labels := map[string]any{}
	for k, v := range sm.Labels {
		labels[k] = v
	}
	for k, v := range objectLabels(mc.Name) {
		labels[k] = v
	}
	selector := map[string]any{}
	for k, v := range selectorLabels(mc.Name) {
		selector[k] = v
	}
	return ownedUnstructured(mc, ServiceMonitorGVK, labels, map[string]any{
		"selector":          map[string]any{"matchLabels": selector},
		"namespaceSelector": map[string]any{"matchNames": []any{mc.Namespace}},
		"endpoints":         []any{endpoint},
		// A target that answers more than the exporter ever gives is not it.
		"sampleLimit": int64(exporter.MaxSamples),
	})
}
