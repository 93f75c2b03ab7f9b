package memcached

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
)

func (r *Reconciler) reconcileNetworkPolicy(ctx context.Context, s *scope) error {
	want := desired.NetworkPolicy(s.memcached, s.spec)
	if want != nil {
		created, err := apply.IfChanged(ctx, r.applier(), s.memcached, "NetworkPolicy", &networkingv1.NetworkPolicy{}, want, networkingv1ac.ExtractNetworkPolicy)
		if created {
			s.markCreated("NetworkPolicy")
		}
		return err
	}
	// Disabled: delete the one this fleet had; the cache answers for a
	// fleet that never had one, without a request.
	key := client.ObjectKeyFromObject(s.memcached)
	np := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, key, np); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(np, s.memcached) {
		return nil
	}
	if err := r.Client.Delete(ctx, np, client.Preconditions{UID: ptr.To(np.UID)}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NetworkPolicy %s: %w", key, err)
	}
	return nil
}
