package memcached

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/internal/controller/status"
)

// report sets the status from what the phases observed (status.Compute,
// which reads no API and writes nothing), then sends the pass's events
// against before, the conditions as the pass read them. The status is
// written afterwards, once, by the status writer.
func (r *Reconciler) report(s *scope, errs []error, before []metav1.Condition) {
	o := s.settled()
	o.Deployment, o.StatefulSet, o.Nodes, o.NodesObserved = s.deployment, s.statefulSet, s.nodes, s.nodesObserved
	o.Servers, o.Restarting, o.RolloutWait = s.servers, s.restarting, s.rolloutWait
	o.Errors, o.Monitoring, o.Auth = errs, s.monitoring, s.auth
	o.Unschedulable, o.UnschedulableMessage = s.unschedulable, s.unschedulableMsg
	status.Compute(s.memcached, o)
	if r.Recorder == nil {
		return
	}
	for _, e := range status.Events(s.memcached.Name, s.createdKinds(), before, s.memcached.Status.Conditions) {
		r.Recorder.Eventf(s.memcached, nil, e.Type, e.Reason, e.Action, "%s", e.Message)
	}
}
