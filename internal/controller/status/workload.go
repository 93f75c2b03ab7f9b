package status

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// workload is what a fleet's Deployment or StatefulSet reports, in the
// terms the status is computed from.
type workload struct {
	kind                           string
	generation, observedGeneration int64
	// desired is the workload's spec.replicas.
	desired                             int32
	replicas, updated, ready, available int32
	// stuck is the message of a rollout past its progress deadline; only
	// a Deployment has one.
	stuck string
}

func fromDeployment(d *appsv1.Deployment) *workload {
	ds := d.Status
	w := &workload{
		kind: "Deployment", generation: d.Generation, observedGeneration: ds.ObservedGeneration,
		desired: ptr.Deref(d.Spec.Replicas, -1), replicas: ds.Replicas, updated: ds.UpdatedReplicas,
		ready: ds.ReadyReplicas, available: ds.AvailableReplicas,
	}
	if c := deploymentCondition(ds, appsv1.DeploymentProgressing); c != nil &&
		c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
		w.stuck = c.Message
	}
	return w
}

// fromStatefulSet counts a pod as updated when it runs the update revision,
// which after a completed rollout is also the current one.
func fromStatefulSet(s *appsv1.StatefulSet) *workload {
	ss := s.Status
	return &workload{
		kind: "StatefulSet", generation: s.Generation, observedGeneration: ss.ObservedGeneration,
		desired: ptr.Deref(s.Spec.Replicas, -1), replicas: ss.Replicas, updated: ss.UpdatedReplicas,
		ready: ss.ReadyReplicas, available: ss.AvailableReplicas,
	}
}

// current: the workload's controller has seen its spec.
func (w *workload) current() bool {
	return w.generation != 0 && w.observedGeneration >= w.generation
}

// done: every pod the workload's spec asks for runs that spec and is
// available, and no other pod is left.
func (w *workload) done() bool {
	return w.updated == w.desired && w.replicas == w.desired && w.available >= w.desired
}

// RolledOut tells whether a fleet's Deployment or StatefulSet reports its
// rollout ended, by the counts the status reads: the watch ranks the
// update that says so above the rollout's progress.
func RolledOut(obj client.Object) bool {
	var w *workload
	switch o := obj.(type) {
	case *appsv1.Deployment:
		w = fromDeployment(o)
	case *appsv1.StatefulSet:
		w = fromStatefulSet(o)
	default:
		return false
	}
	return w.current() && w.done()
}
