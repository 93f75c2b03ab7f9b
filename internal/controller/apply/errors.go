package apply

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// Error is a failed write that says which condition reason it is, and
// whether retrying can help (Stalled: only a change of the spec, or of the
// object in the way, can).
type Error struct {
	Reason  string
	Stalled bool
	Err     error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ConditionReason is the reason the fleet's conditions report for e, and
// whether the fleet is stalled by it.
func (e *Error) ConditionReason() (string, bool) { return e.Reason, e.Stalled }

// ErrNamespaceTerminating is returned by an apply into a namespace being
// deleted: the fleet is going away with it, so there is nothing to retry.
var ErrNamespaceTerminating = errors.New("namespace is terminating")

func applyError(kind string, key client.ObjectKey, err error) error {
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return ErrNamespaceTerminating
	case apierrors.IsInvalid(err):
		return &Error{Reason: cachev1alpha1.ReasonApplyRejected, Stalled: true,
			Err: fmt.Errorf("the API server refuses %s %s built from the spec: %w", kind, key.Name, err)}
	}
	return fmt.Errorf("applying %s %s: %w", kind, key, err)
}

// NameConflict is the error for an object of the fleet's name that the
// fleet does not control: the operator never adopts it.
func NameConflict(kind string, o client.Object) error {
	owner := "no controller"
	if ref := metav1.GetControllerOf(o); ref != nil {
		owner = fmt.Sprintf("controller %s %s", ref.Kind, ref.Name)
	}
	return &Error{Reason: cachev1alpha1.ReasonNameConflict, Stalled: true,
		Err: fmt.Errorf("%s %s/%s exists and is not controlled by this Memcached (it has %s); rename or delete it, or rename the Memcached: the operator never adopts it",
			kind, o.GetNamespace(), o.GetName(), owner)}
}
