package policy

import cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"

// PausedWarning is returned for a spec change to a paused fleet.
const PausedWarning = "the fleet is paused (" + cachev1alpha1.PausedAnnotation + ": \"true\"): this change is stored, and applied once the annotation is removed"

// Paused reports whether the operator is to leave the fleet's objects alone:
// the PausedAnnotation says "true", in exactly that spelling, so that
// "false" or an empty value never pauses a fleet by surprise.
func Paused(mc *cachev1alpha1.Memcached) bool {
	return mc.Annotations[cachev1alpha1.PausedAnnotation] == "true"
}
