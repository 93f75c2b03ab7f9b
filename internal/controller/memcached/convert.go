package memcached

import (
	"encoding/json"
	"fmt"

	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// mustConvert turns a user-supplied API struct (affinity, tolerations, ...)
// into its apply configuration. Apply configurations mirror their types'
// JSON field for field, so the round trip cannot fail for a value that the
// API server already decoded; a failure is a programming error.
func mustConvert[T any](in any) *T {
	raw, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("marshalling %T: %v", in, err))
	}
	out := new(T)
	if err := json.Unmarshal(raw, out); err != nil {
		panic(fmt.Sprintf("converting %T to its apply configuration: %v", in, err))
	}
	return out
}

// ownerReferenceApply makes mc the controller of an owned object, so that
// garbage collection deletes it with mc and its events requeue mc.
func ownerReferenceApply(mc *cachev1alpha1.Memcached) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.GroupVersion.String()).
		WithKind("Memcached").
		WithName(mc.Name).
		WithUID(mc.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
}
