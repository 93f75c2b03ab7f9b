package desired

import (
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// PodDisruptionBudgetEnabled tells whether the fleet gets a budget: by default
// only with more than one pod, since a budget over a single pod would block
// every node drain.
func PodDisruptionBudgetEnabled(spec *cachev1alpha1.MemcachedSpec) bool {
	if pdb := spec.PodDisruptionBudget; pdb != nil && pdb.Enabled != nil {
		return *pdb.Enabled
	}
	return ptr.Deref(spec.Size, 0) > 1
}

// PodDisruptionBudget is the fleet's budget, or nil when it has none.
// Unhealthy pods may always be evicted, so a crash-looping pod never wedges a drain.
func PodDisruptionBudget(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *policyv1ac.PodDisruptionBudgetApplyConfiguration {
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
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(pdbSpec)
}
