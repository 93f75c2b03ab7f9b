package memcached

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// authSecretIndex indexes fleets by the name of the Secret spec.auth names,
// so a Secret's creation or deletion requeues exactly the fleets that use it.
const authSecretIndex = "spec.auth.secretRef.name"

// authState is what the auth phase found: the Secret spec.auth names, and
// whether it exists.
type authState struct {
	secret string
	found  bool
}

// secretGVK is read as metadata only: the operator needs to know that a
// Secret exists, never what it holds.
var secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// observeAuthSecret looks the fleet's auth Secret up in the cache of Secret
// metadata. The kubelet, not the operator, reads the data: a pod whose
// Secret is missing waits in ContainerCreating, so the Deployment phase
// leaves the fleet's Deployment alone until the Secret exists.
func (r *Reconciler) observeAuthSecret(ctx context.Context, s *scope) error {
	a := s.spec.Auth
	if a == nil {
		return nil
	}
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(secretGVK)
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.memcached.Namespace, Name: a.SecretRef.Name}, secret)
	switch {
	case err == nil:
		s.auth = &authState{secret: a.SecretRef.Name, found: true}
	case apierrors.IsNotFound(err):
		s.auth = &authState{secret: a.SecretRef.Name}
	default:
		return fmt.Errorf("reading Secret %s/%s: %w", s.memcached.Namespace, a.SecretRef.Name, err)
	}
	return nil
}

// authMissing is the Deployment phase's answer while the auth Secret does
// not exist: stalled until the user creates it, whose event requeues the
// fleet.
func authMissing(s *scope) error {
	return &reasonError{reason: cachev1alpha1.ReasonAuthSecretMissing, stalled: true,
		err: fmt.Errorf("the Secret %s/%s named by spec.auth.secretRef does not exist: the Deployment is left as it is until it is created", s.memcached.Namespace, s.auth.secret)}
}

// indexAuthSecret is the authSecretIndex of a fleet.
func indexAuthSecret(o client.Object) []string {
	mc, ok := o.(*cachev1alpha1.Memcached)
	if !ok || mc.Spec.Auth == nil || mc.Spec.Auth.SecretRef.Name == "" {
		return nil
	}
	return []string{mc.Spec.Auth.SecretRef.Name}
}

// secretToMemcached requeues the fleets of the Secret's namespace that name it.
func (r *Reconciler) secretToMemcached(ctx context.Context, o client.Object) []reconcile.Request {
	list := &cachev1alpha1.MemcachedList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{authSecretIndex: o.GetName()}); err != nil {
		// A list from the cache fails only when it is not synced or the
		// index is missing; the fleet's next event looks again.
		ctrl.LoggerFrom(ctx).Error(err, "Listing the fleets of a Secret failed", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// secretAppearedOrWent passes a Secret's creation and deletion: that is all
// the operator acts on. Changes of its data reach the pods through the
// kubelet and the reloader sidecar, not through the operator.
var secretAppearedOrWent = predicate.Funcs{
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// secretMetadataOnly keeps a Secret's name, namespace and version in the
// cache and drops the rest: annotations can hold the whole Secret (kubectl
// apply's last-applied-configuration), and managed fields are of no use.
func secretMetadataOnly(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil
	}
	obj.SetAnnotations(nil)
	obj.SetManagedFields(nil)
	obj.SetLabels(nil)
	return in, nil
}

var _ toolscache.TransformFunc = secretMetadataOnly
