package memcached

import cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"

// NameConflictError exposes the conflict error to the package's tests.
var NameConflictError = nameConflict

// AuthMissingError is the Deployment phase's error while the auth Secret of
// the fleet ns/name does not exist.
func AuthMissingError(ns, name, secret string) error {
	s := &scope{memcached: &cachev1alpha1.Memcached{}, auth: &authState{secret: secret}}
	s.memcached.Namespace, s.memcached.Name = ns, name
	return authMissing(s)
}

// SecretMetadataOnly is the transform of the Secret metadata cache.
var SecretMetadataOnly = secretMetadataOnly

// CountsBacklog reports whether the started controller gave r its queue to
// count the fleets waiting for a worker.
func CountsBacklog(r *Reconciler) bool { return r.backlog.Load() != nil }
