package memcached

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/status"
	"github.com/example/memcached-operator/internal/policy"
)

// reconcileServiceMonitor keeps the fleet's ServiceMonitor equal to its spec.
// A pass over a monitored fleet makes one GET and, when nothing changed, no
// write.
func (r *Reconciler) reconcileServiceMonitor(ctx context.Context, s *scope) error {
	wanted := policy.ServiceMonitorEnabled(s.spec) && policy.ExporterEnabled(s.spec)
	kind := apply.OptionalKind{GVK: desired.ServiceMonitorGVK, Condition: cachev1alpha1.ConditionServiceMonitorReady}
	outcome, _, err := r.applier().Optional(ctx, s.memcached, kind, wanted, func() *unstructured.Unstructured {
		return desired.ServiceMonitor(s.memcached, s.spec)
	})
	if err != nil || outcome == apply.None {
		return err
	}
	if outcome == apply.Created {
		s.markCreated(desired.ServiceMonitorGVK.Kind)
	}
	s.monitoring = &status.MonitoringObservation{
		Wanted:     wanted,
		APIMissing: outcome == apply.APIMissing,
		Removed:    outcome == apply.Removed,
		Applied:    outcome == apply.Unchanged || outcome == apply.Created || outcome == apply.Updated,
	}
	return nil
}
