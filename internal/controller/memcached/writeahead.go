package memcached

import (
	"context"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// statusAhead writes, in a pass that creates or changes the Deployment, the
// status that pass will end with at the same time as the applies rather
// than after them. When the API server is busy, a worker's time on a fleet
// is the requests it makes one after another: a new fleet then costs the
// time of one write (its objects and its first status at once) where it
// cost two, and a resized one likewise.
//
// The status is known before the apply returns, because all it reads of the
// Deployment is the status it had (an apply does not change it), the
// replicas applied, and whether the generation moved, which it does exactly
// when the spec does (predictDeployment). The pass then computes its status
// from the API server's answers as always; when that is the status already
// written, patchStatus sends nothing (the write is remembered with the
// resourceVersion it was computed over), and when a phase failed or the
// answer differed, it writes the corrected status, as a pass without this
// would have.
type statusAhead struct {
	r    *Reconciler
	s    *scope
	ctx  context.Context
	once sync.Once
	done chan struct{}
	// written is the status as the API server stored it; nil when nothing
	// was written.
	written *cachev1alpha1.MemcachedStatus
}

// newStatusAhead returns nil when the status of the pass also depends on
// what a phase running at once with the Deployment's finds: a ServiceMonitor
// (its condition reports the apply). Such passes write their status after.
func (r *Reconciler) newStatusAhead(ctx context.Context, s *scope) *statusAhead {
	if policy.ServiceMonitorEnabled(s.spec) && policy.ExporterEnabled(s.spec) ||
		meta.FindStatusCondition(s.original.Status.Conditions, cachev1alpha1.ConditionServiceMonitorReady) != nil {
		return nil
	}
	return &statusAhead{r: r, s: s, ctx: ctx}
}

// start writes the status computed over predicted, once, in the background;
// the Deployment phase calls it just before it sends its apply.
func (a *statusAhead) start(predicted *appsv1.Deployment) {
	if a == nil {
		return
	}
	a.once.Do(func() {
		a.done = make(chan struct{})
		// A copy: the phases still read s.memcached, and the pass computes
		// its own status into it afterwards.
		mc := a.s.memcached.DeepCopy()
		ComputeStatus(mc, a.s.observation(predicted, nil, nil))
		go func() {
			defer close(a.done)
			switch held, err := a.r.writeStatus(a.ctx, a.s.original, mc); {
			case err != nil:
				// The pass writes its status after the applies all the same.
				ctrl.LoggerFrom(a.ctx).V(1).Info("Status written ahead of the applies failed", "error", err.Error())
			case held == 0 && !apiequality.Semantic.DeepEqual(a.s.original.Status, mc.Status):
				a.written = &mc.Status
			}
		}()
	})
}

// wait returns once the write started by start, if any, is done, with the
// status it stored: the pass computes its own over it, so that conditions
// it does not change keep the transition times that write gave them.
func (a *statusAhead) wait() *cachev1alpha1.MemcachedStatus {
	if a == nil || a.done == nil {
		return nil
	}
	<-a.done
	return a.written
}

// predictDeployment is the Deployment an apply of desired returns, as far
// as status reads it: current (the fields the operator owns on cached, nil
// when the apply creates the Deployment) tells whether the spec changes.
func predictDeployment(cached *appsv1.Deployment, current, desired *appsv1ac.DeploymentApplyConfiguration) *appsv1.Deployment {
	if cached == nil || current == nil {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.DeploymentSpec{Replicas: desired.Spec.Replicas}}
	}
	p := cached.DeepCopy()
	p.Spec.Replicas = desired.Spec.Replicas
	if !apiequality.Semantic.DeepEqual(current.Spec, desired.Spec) {
		p.Generation++
	}
	return p
}
