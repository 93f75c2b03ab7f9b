package memcached

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/status"
)

// steady is whether a Deployment has finished rolling out: a scale-down
// during a rollout is spread over old and new pods by the Deployment
// controller, and is left to it.
func steady(d *appsv1.Deployment) bool {
	n := ptr.Deref(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == n && d.Status.UpdatedReplicas == n
}

// markScaleDown runs before a scale-down of a fleet with spread constraints
// is applied: it marks the pods desired.SpreadVictims chooses (and unmarks pods
// chosen before but no longer), then reports the size to apply. While marks
// were written this pass, that is the current size: the ReplicaSet reads
// pods from its cache, and the fleet's own pod events (the marks reaching
// the operator's cache) bring the pass that applies the new size.
func (r *Reconciler) markScaleDown(ctx context.Context, s *scope) (int32, error) {
	size := *s.spec.Size
	cur := s.current
	keys := desired.SpreadKeys(s.spec)
	if len(keys) == 0 || cur == nil || ptr.Deref(cur.Spec.Replicas, 1) <= size || !steady(cur) {
		return size, nil
	}
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.memcached.Namespace), client.MatchingFields{podFleetIndex: s.memcached.Name}); err != nil {
		return 0, fmt.Errorf("listing pods of Memcached %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	var placed []desired.Placement
	active := 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue // the ReplicaSet no longer counts it
		}
		active++
		if p.Spec.NodeName == "" || !status.PodReady(p) {
			continue // unscheduled and unready pods go first whatever their cost
		}
		pl := desired.Placement{Name: p.Name, Node: p.Spec.NodeName, Created: p.CreationTimestamp.Time, Marked: p.Annotations[desired.PodDeletionCost] == desired.FirstToGo}
		for _, k := range keys {
			pl.Domains = append(pl.Domains, desired.DomainOf(p, k))
		}
		placed = append(placed, pl)
	}
	notReady := active - len(placed)
	victims := desired.SpreadVictims(placed, active-int(size)-notReady)
	wrote := false
	for _, p := range placed {
		chosen := slices.Contains(victims, p.Name)
		if chosen == p.Marked {
			continue
		}
		var cost *string // null removes the annotation
		if chosen {
			cost = ptr.To(desired.FirstToGo)
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]*string{desired.PodDeletionCost: cost}}})
		if err != nil {
			return 0, err
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.memcached.Namespace, Name: p.Name}}
		if err := r.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return 0, fmt.Errorf("marking pod %s/%s for the scale-down: %w", s.memcached.Namespace, p.Name, err)
		}
		wrote = true
	}
	if wrote {
		ctrl.LoggerFrom(ctx).V(1).Info("Marked the pods a scale-down removes", "pods", victims)
		return ptr.Deref(cur.Spec.Replicas, 1), nil
	}
	return size, nil
}
