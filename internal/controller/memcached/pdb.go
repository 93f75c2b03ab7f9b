package memcached

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
)

func (r *Reconciler) reconcilePodDisruptionBudget(ctx context.Context, s *scope) error {
	want := desired.PodDisruptionBudget(s.memcached, s.spec)
	key := client.ObjectKeyFromObject(s.memcached)
	if want != nil {
		created, err := apply.IfChanged(ctx, r.applier(), s.memcached, "PodDisruptionBudget", &policyv1.PodDisruptionBudget{}, want, policyv1ac.ExtractPodDisruptionBudget)
		if created {
			s.markCreated("PodDisruptionBudget")
		}
		return err
	}
	// Disabled: delete the one this fleet had, reading the cache first so a
	// fleet without one sends no request.
	pdb := &policyv1.PodDisruptionBudget{}
	if err := r.Client.Get(ctx, key, pdb); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(pdb, s.memcached) {
		return nil
	}
	if err := r.Client.Delete(ctx, pdb, client.Preconditions{UID: ptr.To(pdb.UID)}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting PodDisruptionBudget %s: %w", key, err)
	}
	return nil
}
