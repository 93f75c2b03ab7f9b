package memcached

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// announceRollout writes the first status of a new generation while the
// apply that starts its rollout is in flight, instead of after it: a spec
// change then costs a worker one round trip to the API server rather than
// two. So does a new fleet: its status is written while its objects are
// created. On an API server that is saturated this shortens a pass little
// (the bench measured 0.30-0.52 s against 0.45 s at a thousand new fleets);
// what saves a busy server the write is holdStart, which keeps such a
// report while other fleets wait for a worker.
//
// The status is computed from the Deployment the apply will leave: the one
// cached with its spec changed (a new generation the Deployment controller
// has not observed yet, the desired replicas) and its status as it was,
// since an apply does not touch status; for a new fleet (current is nil),
// the desired Deployment at generation 1 with no status. Everything else is
// what the pass knew before its phases ran. The pass then computes its
// status from the API server's answer as always, over the announced one,
// and writes it only where the two differ: when the apply failed (a name
// taken by someone else's object), or the cache was behind.
//
// Only the first pass of a new generation is announced, and only when it
// changes the Deployment's spec or creates it; that is when the pass would
// write a new status anyway (its observedGeneration moves), and the only
// case where the Deployment's answer is known in advance. A Deployment
// deleted under an observed fleet is recreated first and reported after.
func (r *Reconciler) announceRollout(ctx context.Context, s *scope, live *appsv1.Deployment, current, desired *appsv1ac.DeploymentApplyConfiguration) {
	if s.original.Status.ObservedGeneration >= s.memcached.Generation || desired.Spec == nil {
		return
	}
	var predicted *appsv1.Deployment
	switch {
	case current == nil:
		predicted = &appsv1.Deployment{}
		if err := fromApplyConfiguration(desired, predicted); err != nil {
			return
		}
		predicted.Generation = 1
	case apiequality.Semantic.DeepEqual(current.Spec, desired.Spec):
		return
	default:
		predicted = live.DeepCopy()
		predicted.Generation++
		if desired.Spec.Replicas != nil {
			// A copy: the apply decodes the API server's answer into desired.
			predicted.Spec.Replicas = ptr.To(*desired.Spec.Replicas)
		}
	}
	o := s.settled()
	o.Deployment = predicted
	mc := s.original.DeepCopy()
	ComputeStatus(mc, o)
	s.announced = make(chan *cachev1alpha1.Memcached, 1)
	go func() {
		as := &scope{original: s.original, memcached: mc}
		if err := r.patchStatus(ctx, as); err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Announcing the rollout failed; the pass writes its status", "error", err.Error())
			s.announced <- nil
			return
		}
		if mc.ResourceVersion == s.original.ResourceVersion {
			s.announced <- nil // nothing was sent
			return
		}
		s.announced <- mc
	}()
}

// takeAnnounced waits for announceRollout's write, if the pass made one,
// and continues from the status it wrote: the pass's own status is then
// computed over it (conditions that did not change keep its transition
// times) and patched against it.
func (s *scope) takeAnnounced() {
	if s.announced == nil {
		return
	}
	written := <-s.announced
	if written == nil {
		return
	}
	s.memcached.Status = *written.Status.DeepCopy()
	s.memcached.ResourceVersion = written.ResourceVersion
	s.original = s.memcached.DeepCopy()
}
