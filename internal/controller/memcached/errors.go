package memcached

import (
	"errors"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// reasonError is a phase error that says which condition reason it is, and
// whether retrying can help (stalled: only a change of spec or of the
// conflicting object can).
type reasonError struct {
	reason  string
	stalled bool
	err     error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// errNamespaceTerminating is returned by an apply into a namespace being
// deleted: the fleet is going away with it, so there is nothing to retry.
var errNamespaceTerminating = errors.New("namespace is terminating")

// failure sums up the errors of one pass: the reason the conditions report,
// whether the fleet is stalled, and whether any of them is worth a retry.
type failure struct {
	reason    string
	stalled   bool
	transient bool
}

func classify(errs []error) failure {
	var f failure
	for _, err := range errs {
		var re *reasonError
		switch {
		case errors.As(err, &re):
			if f.reason == "" || (re.stalled && !f.stalled) {
				f.reason = re.reason
			}
			f.stalled = f.stalled || re.stalled
		default:
			if f.reason == "" {
				f.reason = cachev1alpha1.ReasonReconcileFailed
			}
			f.transient = true
		}
	}
	return f
}
