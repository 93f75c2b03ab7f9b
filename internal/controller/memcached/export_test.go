package memcached

import corev1 "k8s.io/api/core/v1"

// NameConflictError exposes the conflict error to the package's tests.
var NameConflictError = nameConflict

// ObserveAuth is what the pass observes of the auth Secret from the pods,
// as ComputeStatus receives it.
func ObserveAuth(pods []corev1.Pod) *AuthObservation {
	a := observeAuth(pods)
	return &AuthObservation{Blocked: a.blocked, Message: a.message, Mounted: a.mounted}
}

// CountsBacklog reports whether the started controller gave r its queue to
// count the fleets waiting for a worker.
func CountsBacklog(r *Reconciler) bool { return r.backlog.Load() != nil }
