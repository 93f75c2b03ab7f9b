package memcached

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// observePods finds the fleet's pods that no node fits, so that a rollout
// waiting on them says why instead of only counting pods, and what the pods
// say of the auth Secret. The Deployment and its ReplicaSet report neither;
// the pods' PodScheduled condition and container states do.
func (r *Reconciler) observePods(ctx context.Context, s *scope) error {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.memcached.Namespace), client.MatchingFields{podFleetIndex: s.memcached.Name}); err != nil {
		return fmt.Errorf("listing pods of Memcached %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	s.unschedulable, s.unschedulableMsg = Unschedulable(list.Items)
	if s.spec.Auth != nil {
		s.auth = observeAuth(list.Items)
	}
	return nil
}

// Unschedulable counts the pods the scheduler found no node for, and
// returns the message of the first of them by name (stable from pass to
// pass, so an unchanged situation writes no status).
func Unschedulable(pods []corev1.Pod) (int, string) {
	n, first, msg := 0, "", ""
	for i := range pods {
		p := &pods[i]
		if c := unschedulableCondition(p); c != nil && p.DeletionTimestamp == nil {
			n++
			if first == "" || p.Name < first {
				first, msg = p.Name, c.Message
			}
		}
	}
	return n, msg
}

func unschedulableCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}

// placementOnly keeps of a cached pod only what observePods, markScaleDown
// and the event handler read: a fleet of a thousand pods then costs little
// memory.
func placementOnly(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	out := &corev1.Pod{ObjectMeta: cachedMeta(&p.ObjectMeta), Spec: corev1.PodSpec{NodeName: p.Spec.NodeName}}
	if cost, ok := p.Annotations[PodDeletionCost]; ok {
		out.Annotations = map[string]string{PodDeletionCost: cost}
	}
	if c := unschedulableCondition(p); c != nil {
		out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
	}
	if podReady(p) {
		out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	}
	if c := authCheckStatus(p); c != nil && authBlocked(p) != "" {
		kept := corev1.ContainerStatus{Name: c.Name, State: c.State}
		if t := c.LastTerminationState.Terminated; t != nil {
			kept.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Message: t.Message}
		}
		out.Status.InitContainerStatuses = []corev1.ContainerStatus{kept}
	}
	return out, nil
}

// cachedMeta is the metadata a trimmed cache keeps: the object's identity,
// its labels (which index and map it to a fleet) and its lifetime.
func cachedMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, DeletionTimestamp: m.DeletionTimestamp, CreationTimestamp: m.CreationTimestamp,
	}
}

// podChanged passes the pod events that can change what a pass does with
// pods: a pod becoming or ceasing to be unschedulable or held back by a
// configuration error (or its message changing), such a pod going away,
// and a scale-down mark reaching the cache. Every other pod event (IPs,
// other container states, readiness) is the EndpointSlices' and the
// Deployment's business.
var podChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return isWaiting(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return waitingMessage(e.ObjectOld) != waitingMessage(e.ObjectNew) ||
			e.ObjectOld.GetAnnotations()[PodDeletionCost] != e.ObjectNew.GetAnnotations()[PodDeletionCost]
	},
	DeleteFunc:  func(e event.DeleteEvent) bool { return isWaiting(e.Object) },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// waitingMessage says why a pod waits where status reports it: no node
// fits it, or the kubelet cannot create its memcached container.
func waitingMessage(o client.Object) string {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return ""
	}
	msg := ""
	if c := unschedulableCondition(p); c != nil {
		msg = "unschedulable: " + c.Message
	}
	if m := authBlocked(p); m != "" {
		msg += "; config: " + m
	}
	return msg
}

func isWaiting(o client.Object) bool { return waitingMessage(o) != "" }

// podToMemcached maps a pod to its fleet by the instance label.
func podToMemcached(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[LabelInstance]
	if o.GetLabels()[LabelManagedBy] != ManagedByValue || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
