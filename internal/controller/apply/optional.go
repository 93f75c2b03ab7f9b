package apply

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// OptionalKind is an owned object whose API another project serves
// (prometheus-operator's ServiceMonitor, cert-manager's Certificate). The
// operator starts without those CRDs: it asks the RESTMapper only when a
// fleet wants one and reads the object live, since an informer would need
// the CRD at start.
type OptionalKind struct {
	GVK schema.GroupVersionKind
	// Condition is the status condition a fleet with such an object
	// carries. The Applier also remembers the fleets it gave one: a pass can
	// read the fleet from the cache before the status write that added the
	// condition arrived, and turning the feature off right after the pass
	// that created the object must still delete it.
	Condition string
}

// optionalKinds are the kinds Optional is used for, so a deleted fleet's
// memory of them can be forgotten.
var optionalKinds = []string{"Certificate", "ServiceMonitor"}

type optionalKey struct {
	kind  string
	fleet types.NamespacedName
}

// Outcome is what Optional did.
type Outcome int

const (
	// None is a kind not wanted and never had: nothing was asked.
	None Outcome = iota
	// APIMissing is a kind wanted whose API the cluster does not serve.
	APIMissing
	// Removed is a kind not wanted, of which the fleet owns none (any more).
	Removed
	// Unchanged is an object that already matched: no write.
	Unchanged
	// Created is an object created by an apply.
	Created
	// Updated is an object changed by an apply.
	Updated
)

// Optional keeps one optional owned object equal to desired (built
// only when wanted), or deletes the fleet's own when not wanted. A fleet that
// never wanted one costs nothing: no discovery, no read. live is the object
// as read before any write, when there was one. A same-named object the
// fleet does not control is never touched: it is a NameConflict when wanted.
func (a *Applier) Optional(ctx context.Context, mc *cachev1alpha1.Memcached, k OptionalKind, wanted bool,
	build func() *unstructured.Unstructured) (Outcome, *unstructured.Unstructured, error) {
	key := client.ObjectKeyFromObject(mc)
	memo := optionalKey{k.GVK.Kind, key}
	_, gave := a.gave.Load(memo)
	had := gave || meta.FindStatusCondition(mc.Status.Conditions, k.Condition) != nil
	if !wanted && !had {
		return None, nil, nil
	}
	removed := func() Outcome {
		a.gave.Delete(memo)
		return Removed
	}
	if _, err := a.Client.RESTMapper().RESTMapping(k.GVK.GroupKind(), k.GVK.Version); meta.IsNoMatchError(err) {
		if !wanted {
			// Without the API there is nothing left to delete.
			return removed(), nil, nil
		}
		return APIMissing, nil, nil
	} else if err != nil {
		return 0, nil, fmt.Errorf("discovering %s: %w", k.GVK, err)
	}
	apiGone := func() (Outcome, *unstructured.Unstructured, error) {
		a.forgetMappings()
		if !wanted {
			return removed(), nil, nil
		}
		return APIMissing, nil, nil
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(k.GVK)
	err := a.apiReader().Get(ctx, key, live)
	exists := err == nil
	switch {
	case notServed(err):
		return apiGone()
	case err != nil && !apierrors.IsNotFound(err):
		return 0, nil, fmt.Errorf("reading %s %s: %w", k.GVK.Kind, key, err)
	case exists && !metav1.IsControlledBy(live, mc):
		if !wanted {
			return removed(), nil, nil
		}
		return 0, nil, NameConflict(k.GVK.Kind, live)
	case !wanted:
		if exists {
			if err := a.Client.Delete(ctx, live, client.Preconditions{UID: ptr.To(live.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
				return 0, nil, fmt.Errorf("deleting %s %s: %w", k.GVK.Kind, key, err)
			}
		}
		return removed(), nil, nil
	}
	a.gave.Store(memo, struct{}{})
	desired := build()
	if exists && optionalMatches(live, desired) {
		applyRequests.WithLabelValues(k.GVK.Kind, applySkipped).Inc()
		return Unchanged, live, nil
	}
	applyRequests.WithLabelValues(k.GVK.Kind, applySent).Inc()
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); notServed(err) {
		return apiGone()
	} else if err != nil {
		return 0, nil, applyError(k.GVK.Kind, key, err)
	}
	if !exists {
		return Created, nil, nil
	}
	return Updated, live, nil
}

// optionalMatches tells whether live already holds what desired says: its
// labels, its controller reference (checked by the caller) and its spec.
// Neither cert-manager nor prometheus-operator defaults fields into the
// spec of these objects, so the spec is compared whole.
func optionalMatches(live, desired *unstructured.Unstructured) bool {
	for k, v := range desired.GetLabels() {
		if live.GetLabels()[k] != v {
			return false
		}
	}
	return apiequality.Semantic.DeepEqual(live.Object["spec"], desired.Object["spec"])
}

// notServed tells whether err is the API server's answer for a resource it
// does not serve (its CRD removed), which comes without a Status of its own,
// rather than for an object it does not have.
func notServed(err error) bool {
	return apierrors.IsNotFound(err) && apierrors.HasStatusCause(err, metav1.CauseTypeUnexpectedServerResponse)
}

// forgetMappings makes the next REST mapping look at discovery again, so an
// API that was uninstalled is reported missing instead of being retried.
func (a *Applier) forgetMappings() {
	if m, ok := a.Client.RESTMapper().(meta.ResettableRESTMapper); ok {
		m.Reset()
	}
}
