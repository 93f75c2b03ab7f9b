package memcached

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// observePods lists the fleet's pods from the metadata-only cache. Pods being
// deleted are left out: they no longer serve.
func (r *Reconciler) observePods(ctx context.Context, s *scope) error {
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.Client.List(ctx, pods, client.InNamespace(s.memcached.Namespace),
		client.MatchingLabels(selectorLabels(s.memcached.Name))); err != nil {
		return fmt.Errorf("listing pods of Memcached %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	s.pods = s.pods[:0]
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp.IsZero() {
			s.pods = append(s.pods, pods.Items[i].Name)
		}
	}
	return nil
}

// updateStatus sets the status from what the phases observed; it reads no
// API and writes nothing, so it can be table-tested.
func (r *Reconciler) updateStatus(s *scope, reconcileErr error) {
	before := slices.Clone(s.memcached.Status.Conditions)
	ComputeStatus(s.memcached, &s.spec, s.deployment, s.pods, reconcileErr)
	r.recordTransitions(s, before)
}

// ComputeStatus derives the whole status of mc. Conditions only change their
// lastTransitionTime when their status flips, so an unchanged fleet yields an
// identical status and no write.
func ComputeStatus(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec, dep *appsv1.Deployment, pods []string, reconcileErr error) {
	st := &mc.Status
	gen := mc.Generation
	desired := ptr.Deref(spec.Size, 0)
	nodes := slices.Clone(pods)
	slices.Sort(nodes)
	if len(nodes) == 0 {
		nodes = nil
	}
	st.Nodes = nodes
	st.Selector = SelectorString(mc.Name)
	st.ObservedGeneration = gen
	st.Replicas, st.ReadyReplicas = 0, 0
	var ds appsv1.DeploymentStatus
	depCurrent := false
	if dep != nil {
		ds = dep.Status
		st.Replicas, st.ReadyReplicas = ds.Replicas, ds.ReadyReplicas
		depCurrent = dep.Generation != 0 && ds.ObservedGeneration >= dep.Generation &&
			ptr.Deref(dep.Spec.Replicas, -1) == desired
	}
	rolledOut := depCurrent && ds.UpdatedReplicas == desired && ds.Replicas == desired && ds.AvailableReplicas == desired

	set := func(t string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}

	switch {
	case desired == 0 && rolledOut:
		set(cachev1alpha1.ConditionAvailable, true, cachev1alpha1.ReasonScaledToZero, "size is 0: no pod is desired")
	case rolledOut:
		set(cachev1alpha1.ConditionAvailable, true, cachev1alpha1.ReasonAllReplicasReady,
			fmt.Sprintf("%d/%d pods ready", ds.AvailableReplicas, desired))
	default:
		set(cachev1alpha1.ConditionAvailable, false, cachev1alpha1.ReasonReplicasNotReady,
			fmt.Sprintf("%d/%d pods of the current spec ready", min(ds.AvailableReplicas, ds.UpdatedReplicas), desired))
	}

	if rolledOut {
		set(cachev1alpha1.ConditionProgressing, false, cachev1alpha1.ReasonRolloutComplete, "the Deployment matches the spec")
	} else {
		set(cachev1alpha1.ConditionProgressing, true, cachev1alpha1.ReasonRollingOut,
			fmt.Sprintf("%d updated, %d total, %d available of %d desired", ds.UpdatedReplicas, ds.Replicas, ds.AvailableReplicas, desired))
	}

	stuck := deploymentCondition(ds, appsv1.DeploymentProgressing)
	switch {
	case reconcileErr != nil:
		set(cachev1alpha1.ConditionDegraded, true, cachev1alpha1.ReasonReconcileFailed, reconcileErr.Error())
	case stuck != nil && stuck.Status == corev1.ConditionFalse && stuck.Reason == "ProgressDeadlineExceeded":
		set(cachev1alpha1.ConditionDegraded, true, cachev1alpha1.ReasonRolloutStuck, stuck.Message)
	default:
		set(cachev1alpha1.ConditionDegraded, false, cachev1alpha1.ReasonReconciled, "every owned object matches the spec")
	}
}

func deploymentCondition(ds appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range ds.Conditions {
		if ds.Conditions[i].Type == t {
			return &ds.Conditions[i]
		}
	}
	return nil
}

// recordTransitions emits an event when an object is created or a condition
// flips, never on a pass that changed nothing, so events stay a history of
// changes rather than a heartbeat.
func (r *Reconciler) recordTransitions(s *scope, before []metav1.Condition) {
	if r.Recorder == nil {
		return
	}
	mc := s.memcached
	for _, kind := range s.created {
		r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, "Created", "Create", "created %s %s", kind, mc.Name)
	}
	for _, c := range mc.Status.Conditions {
		if c.Type == cachev1alpha1.ConditionProgressing {
			// Every scale flips it twice; Available tells the same story once.
			continue
		}
		old := meta.FindStatusCondition(before, c.Type)
		if (old != nil && old.Status == c.Status) || (old == nil && c.Status == metav1.ConditionFalse) {
			continue
		}
		eventType := corev1.EventTypeNormal
		if (c.Type == cachev1alpha1.ConditionDegraded) == (c.Status == metav1.ConditionTrue) {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(mc, nil, eventType, c.Reason, "Reconcile", "%s is %s: %s", c.Type, c.Status, c.Message)
	}
}
