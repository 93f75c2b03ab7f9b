package status

import (
	"errors"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// Failure sums up the errors of one pass: the reason the conditions report,
// whether the fleet is stalled, and whether any of them is worth a retry.
type Failure struct {
	Reason    string
	Stalled   bool
	Transient bool
}

// reasoned is an error that says which condition reason it is, and whether
// retrying can help (apply.Error).
type reasoned interface {
	error
	ConditionReason() (reason string, stalled bool)
}

// Classify sums up errs: the first stalling error's reason wins, then the
// first error's; an error that gives no reason is ReconcileFailed and worth
// a retry.
func Classify(errs []error) Failure {
	var f Failure
	for _, err := range errs {
		var re reasoned
		switch {
		case errors.As(err, &re):
			reason, stalled := re.ConditionReason()
			if f.Reason == "" || (stalled && !f.Stalled) {
				f.Reason = reason
			}
			f.Stalled = f.Stalled || stalled
		default:
			if f.Reason == "" {
				f.Reason = cachev1alpha1.ReasonReconcileFailed
			}
			f.Transient = true
		}
	}
	return f
}
