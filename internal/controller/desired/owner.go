package desired

import (
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// ownerReference makes mc the controller of an owned object, so that
// garbage collection deletes it with mc and its events requeue mc.
func ownerReference(mc *cachev1alpha1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.GroupVersion.String()).
		WithKind("Memcached").
		WithName(mc.Name).
		WithUID(mc.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}
