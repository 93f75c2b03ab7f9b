package memcached

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
)

// The reconciler's own metrics, beside controller-runtime's and the apply
// machinery's. Per-fleet series carry namespace and name only (two series a
// fleet), so their number follows the number of fleets, never of pods or
// requests.
var (
	statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_status_writes_total",
		Help: "Status writes, by cause: progress (a rollout's progress alone, at most every --status-progress-interval) or change (anything else).",
	}, []string{"cause"})
	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "memcached_operator_reconcile_errors_total",
		Help: "Reconcile phases that failed, by phase and condition reason.",
	}, []string{"phase", "reason"})
)

// FleetCollector reports, at scrape time, how many fleets each condition
// holds for and each fleet's desired and ready pods, read from the
// manager's cache: no state to keep in step with deletions, no API call.
// Only the leading replica reports them: every replica's cache holds every
// fleet, and a sum over replicas would count each fleet once a replica.
type FleetCollector struct {
	Reader client.Reader
	// Leading tells whether this replica leads; nil: it always does.
	Leading func() bool

	fleets, pods *prometheus.Desc
}

// NewFleetCollector reads Memcacheds through reader (the manager's cache).
func NewFleetCollector(reader client.Reader) *FleetCollector {
	return &FleetCollector{
		Reader: reader,
		fleets: prometheus.NewDesc("memcached_operator_fleets",
			"Memcached fleets by condition type and status.", []string{"condition", "status"}, nil),
		pods: prometheus.NewDesc("memcached_operator_fleet_pods",
			"A fleet's pods: desired (spec.size) and ready (status.readyReplicas).", []string{"namespace", "name", "state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *FleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.fleets
	ch <- c.pods
}

// Collect implements prometheus.Collector.
func (c *FleetCollector) Collect(ch chan<- prometheus.Metric) {
	if c.Leading != nil && !c.Leading() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &cachev1alpha1.MemcachedList{}
	if err := c.Reader.List(ctx, list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.fleets, err)
		return
	}
	counts := map[[2]string]int{}
	for _, t := range []string{cachev1alpha1.ConditionReady, cachev1alpha1.ConditionAvailable, cachev1alpha1.ConditionDegraded, cachev1alpha1.ConditionStalled} {
		for _, s := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
			counts[[2]string{t, string(s)}] = 0
		}
	}
	for i := range list.Items {
		mc := &list.Items[i]
		for key := range counts {
			status := metav1.ConditionUnknown
			if cond := meta.FindStatusCondition(mc.Status.Conditions, key[0]); cond != nil && cond.ObservedGeneration == mc.Generation {
				status = cond.Status
			}
			if string(status) == key[1] {
				counts[key]++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(ptr.Deref(mc.Spec.Size, 1)), mc.Namespace, mc.Name, "desired")
		ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(mc.Status.ReadyReplicas), mc.Namespace, mc.Name, "ready")
	}
	for key, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.fleets, prometheus.GaugeValue, float64(n), key[0], key[1])
	}
}

// RegisterMetrics adds the operator's metrics to reg (controller-runtime's
// metrics.Registry in the manager), reading fleets through reader and
// reporting them while elected is closed (the manager's Elected(); nil:
// always).
func RegisterMetrics(reg prometheus.Registerer, reader client.Reader, elected <-chan struct{}) error {
	fleets := NewFleetCollector(reader)
	if elected != nil {
		fleets.Leading = func() bool {
			select {
			case <-elected:
				return true
			default:
				return false
			}
		}
	}
	for _, c := range append(apply.Collectors(), statusWrites, reconcileErrors, fleets) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
