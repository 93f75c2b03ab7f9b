package memcached

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

func (r *Reconciler) reconcilePodDisruptionBudget(ctx context.Context, s *scope) error {
	desired := BuildPodDisruptionBudget(s.memcached, s.spec)
	key := client.ObjectKeyFromObject(s.memcached)
	if desired != nil {
		created, err := applyIfChanged(ctx, r, s.memcached, "PodDisruptionBudget", &policyv1.PodDisruptionBudget{}, desired, policyv1ac.ExtractPodDisruptionBudget, nil)
		if created {
			s.markCreated("PodDisruptionBudget")
		}
		return err
	}
	// Disabled: delete the one this fleet had, reading the cache first so a
	// fleet without one sends no request.
	pdb := &policyv1.PodDisruptionBudget{}
	if err := r.Client.Get(ctx, key, pdb); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(pdb, s.memcached) {
		return nil
	}
	if err := r.Client.Delete(ctx, pdb, client.Preconditions{UID: ptr.To(pdb.UID)}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting PodDisruptionBudget %s: %w", key, err)
	}
	return nil
}

// PodDisruptionBudgetEnabled tells whether the fleet gets a budget: by default
// only with more than one pod, since a budget over a single pod would block
// every node drain.
func PodDisruptionBudgetEnabled(spec *cachev1alpha1.MemcachedSpec) bool {
	if pdb := spec.PodDisruptionBudget; pdb != nil && pdb.Enabled != nil {
		return *pdb.Enabled
	}
	return ptr.Deref(spec.Size, 0) > 1
}

// BuildPodDisruptionBudget is the fleet's budget, or nil when it has none.
// Unhealthy pods may always be evicted, so a crash-looping pod never wedges a drain.
func BuildPodDisruptionBudget(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
	if !PodDisruptionBudgetEnabled(spec) {
		return nil
	}
	pdbSpec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc.Name))).
		WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow)
	cfg := ptr.Deref(spec.PodDisruptionBudget, cachev1alpha1.PodDisruptionBudgetSpec{})
	if cfg.MinAvailable != nil {
		pdbSpec.WithMinAvailable(*cfg.MinAvailable)
	} else {
		pdbSpec.WithMaxUnavailable(ptr.Deref(cfg.MaxUnavailable, intstr.FromInt32(1)))
	}
	return policyv1ac.PodDisruptionBudget(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc.Name)).
		WithOwnerReferences(ownerReferenceApply(mc)).
		WithSpec(pdbSpec)
}
