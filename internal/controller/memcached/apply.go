package memcached

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyIfChanged server-side applies desired unless the fields FieldOwner
// owns on the live object already hold exactly those values. Comparing the
// extracted fields, not the whole object, skips the request when nothing
// drifted while still catching an edit by anyone else: such an edit moves
// ownership of the field away from us, so it no longer extracts equal.
// live receives the object as the cache holds it (left empty when there is
// none); the result tells whether the apply created the object.
func applyIfChanged[O client.Object, A runtime.ApplyConfiguration](
	ctx context.Context, c client.Client, kind string, live O, key client.ObjectKey, desired A,
	extract func(O, string) (A, error),
) (created bool, err error) {
	switch err := c.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		created = true
	case err != nil:
		return false, fmt.Errorf("reading %s %s: %w", kind, key, err)
	default:
		current, err := extract(live, FieldOwner)
		if err != nil {
			return false, fmt.Errorf("extracting applied fields of %s %s: %w", kind, key, err)
		}
		if apiequality.Semantic.DeepEqual(current, desired) {
			return false, nil
		}
	}
	if err := c.Apply(ctx, desired, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying %s %s: %w", kind, key, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Applied owned object", "kind", kind, "name", key.Name, "created", created)
	return created, nil
}
