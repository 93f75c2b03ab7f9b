package memcached

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/status"
)

// announceRollout writes the first status of a new generation while the
// apply that starts its rollout is in flight, instead of after it: a spec
// change then costs a worker one round trip to the API server rather than
// two. So does a new fleet: its status is written while its objects are
// created.
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
func (r *Reconciler) announceRollout(ctx context.Context, s *scope, live *appsv1.Deployment, current, want *appsv1ac.DeploymentApplyConfiguration) {
	if s.original.Status.ObservedGeneration >= s.memcached.Generation || want.Spec == nil {
		return
	}
	var predicted *appsv1.Deployment
	switch {
	case current == nil:
		predicted = &appsv1.Deployment{}
		if err := apply.FromApplyConfiguration(want, predicted); err != nil {
			return
		}
		predicted.Generation = 1
	case apiequality.Semantic.DeepEqual(current.Spec, want.Spec):
		return
	default:
		predicted = live.DeepCopy()
		predicted.Generation++
		if want.Spec.Replicas != nil {
			// A copy: the apply decodes the API server's answer into want.
			predicted.Spec.Replicas = ptr.To(*want.Spec.Replicas)
		}
	}
	o := s.settled()
	o.Deployment = predicted
	mc := s.original.DeepCopy()
	status.Compute(mc, o)
	s.announced = make(chan *cachev1alpha1.Memcached, 1)
	go func() {
		if _, err := r.writer().write(ctx, r.Client, s.original, mc); err != nil {
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
