package memcached

import (
	"context"
	"fmt"
	"sync"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// optionalKind is an owned object whose API another project serves
// (prometheus-operator's ServiceMonitor, cert-manager's Certificate). The
// operator starts without those CRDs: it asks the RESTMapper only when a
// fleet wants one and reads the object live, since an informer would need
// the CRD at start.
type optionalKind struct {
	gvk schema.GroupVersionKind
	// memo holds the fleets this process gave such an object. The fleet's
	// condition says one may exist too, but a pass can read the fleet from
	// the cache before the status write that added the condition arrived:
	// turning the feature off right after the pass that created the object
	// must still delete it.
	memo *sync.Map
	// condition is the status condition a fleet with such an object carries.
	condition string
}

// optionalOutcome is what reconcileOptional did.
type optionalOutcome int

const (
	// optionalNone: not wanted and never had; nothing was asked.
	optionalNone optionalOutcome = iota
	// optionalAPIMissing: wanted, but the cluster does not serve the API.
	optionalAPIMissing
	// optionalRemoved: not wanted, and there is none (any more) that the
	// fleet owns.
	optionalRemoved
	// optionalUnchanged: the live object already matches; no write.
	optionalUnchanged
	// optionalCreated and optionalUpdated: an apply was sent.
	optionalCreated
	optionalUpdated
)

// reconcileOptional keeps one optional owned object equal to desired (built
// only when wanted), or deletes the fleet's own when not wanted. A fleet that
// never wanted one costs nothing: no discovery, no read. live is the object
// as read before any write, when there was one. A same-named object the
// fleet does not control is never touched: it is a NameConflict when wanted.
func (r *Reconciler) reconcileOptional(ctx context.Context, s *scope, k optionalKind, wanted bool,
	build func() *unstructured.Unstructured) (optionalOutcome, *unstructured.Unstructured, error) {
	key := client.ObjectKeyFromObject(s.memcached)
	_, applied := k.memo.Load(key)
	had := applied || meta.FindStatusCondition(s.memcached.Status.Conditions, k.condition) != nil
	if !wanted && !had {
		return optionalNone, nil, nil
	}
	removed := func() optionalOutcome {
		k.memo.Delete(key)
		return optionalRemoved
	}
	if _, err := r.Client.RESTMapper().RESTMapping(k.gvk.GroupKind(), k.gvk.Version); meta.IsNoMatchError(err) {
		if !wanted {
			// Without the API there is nothing left to delete.
			return removed(), nil, nil
		}
		return optionalAPIMissing, nil, nil
	} else if err != nil {
		return 0, nil, fmt.Errorf("discovering %s: %w", k.gvk, err)
	}
	apiGone := func() (optionalOutcome, *unstructured.Unstructured, error) {
		r.forgetMappings()
		if !wanted {
			return removed(), nil, nil
		}
		return optionalAPIMissing, nil, nil
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(k.gvk)
	err := r.apiReader().Get(ctx, key, live)
	exists := err == nil
	switch {
	case notServed(err):
		return apiGone()
	case err != nil && !apierrors.IsNotFound(err):
		return 0, nil, fmt.Errorf("reading %s %s: %w", k.gvk.Kind, key, err)
	case exists && !metav1.IsControlledBy(live, s.memcached):
		if !wanted {
			return removed(), nil, nil
		}
		return 0, nil, nameConflict(k.gvk.Kind, live)
	case !wanted:
		if exists {
			if err := r.Client.Delete(ctx, live, client.Preconditions{UID: ptr.To(live.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
				return 0, nil, fmt.Errorf("deleting %s %s: %w", k.gvk.Kind, key, err)
			}
		}
		return removed(), nil, nil
	}
	k.memo.Store(key, struct{}{})
	desired := build()
	if exists && optionalMatches(live, desired) {
		applyRequests.WithLabelValues(k.gvk.Kind, applySkipped).Inc()
		return optionalUnchanged, live, nil
	}
	applyRequests.WithLabelValues(k.gvk.Kind, applySent).Inc()
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(FieldOwner), client.ForceOwnership); notServed(err) {
		return apiGone()
	} else if err != nil {
		return 0, nil, applyError(k.gvk.Kind, key, err)
	}
	if !exists {
		s.markCreated(k.gvk.Kind)
		return optionalCreated, nil, nil
	}
	return optionalUpdated, live, nil
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

// optionalObject is the skeleton both optional kinds are built on: the
// fleet's name, namespace, labels and controller reference.
func optionalObject(mc *cachev1alpha1.Memcached, gvk schema.GroupVersionKind, labels map[string]any, spec map[string]any) *unstructured.Unstructured {
	owner, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&metav1.OwnerReference{
		APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached", Name: mc.Name, UID: mc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})
	if err != nil {
		panic(fmt.Sprintf("converting an owner reference: %v", err))
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": mc.Name, "namespace": mc.Namespace, "labels": labels, "ownerReferences": []any{owner},
		},
		"spec": spec,
	}}
	u.SetGroupVersionKind(gvk)
	return u
}

// notServed tells whether err is the API server's answer for a resource it
// does not serve (its CRD removed), which comes without a Status of its own,
// rather than for an object it does not have.
func notServed(err error) bool {
	return apierrors.IsNotFound(err) && apierrors.HasStatusCause(err, metav1.CauseTypeUnexpectedServerResponse)
}

// forgetMappings makes the next REST mapping look at discovery again, so an
// API that was uninstalled is reported missing instead of being retried.
func (r *Reconciler) forgetMappings() {
	if m, ok := r.Client.RESTMapper().(meta.ResettableRESTMapper); ok {
		m.Reset()
	}
}
