// Package memcached reconciles a Memcached into the objects that run it: a
// Deployment of memcached pods, a headless Service that gives each pod a
// stable DNS name for client-side hashing, and a PodDisruptionBudget. Each
// owned kind has a file with its pure builder and its phase; status.go
// derives the status in one place.
package memcached

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// FieldOwner is the server-side apply field manager of every object the
// operator writes; one fixed name lets it take back fields others changed.
const FieldOwner = "memcached-operator"

// Reconciler keeps a Memcached's owned objects equal to its spec and reports
// what it observes in its status.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits events on state transitions.
	Recorder recorder.EventRecorder
	// Defaults are applied to a copy of the spec before building, so the
	// operator behaves the same when its mutating webhook is off.
	Defaults policy.Config
}

// scope is what one pass knows: the object as read, the object being
// updated, and what the phases observed on the way.
type scope struct {
	original  *cachev1alpha1.Memcached
	memcached *cachev1alpha1.Memcached
	// spec is memcached.Spec with defaults filled in; builders read only this.
	spec       cachev1alpha1.MemcachedSpec
	deployment *appsv1.Deployment
	pods       []string
	created    []string
}

type phase func(ctx context.Context, s *scope) error

// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs the phases in order, then writes the status once, and only
// when it changed. A pass over a fleet that already matches its spec sends no
// write request at all.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &cachev1alpha1.Memcached{}
	if err := r.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		// Owner references hand the children to the garbage collector.
		return ctrl.Result{}, nil
	}
	s := &scope{original: mc.DeepCopy(), memcached: mc, spec: *mc.Spec.DeepCopy()}
	policy.Default(&s.spec, r.Defaults)

	var phaseErr error
	for _, p := range []phase{r.reconcileDeployment, r.reconcileService, r.reconcilePodDisruptionBudget, r.observePods} {
		if phaseErr = p(ctx, s); phaseErr != nil {
			break
		}
	}
	r.updateStatus(s, phaseErr)
	if err := r.patchStatus(ctx, s); err != nil {
		return ctrl.Result{}, errors.Join(phaseErr, err)
	}
	if apierrors.IsInvalid(phaseErr) {
		// The spec builds an object the API server refuses; retrying cannot
		// help until the spec changes, which requeues on its own.
		return ctrl.Result{}, reconcile.TerminalError(phaseErr)
	}
	return ctrl.Result{}, phaseErr
}

func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	if apiequality.Semantic.DeepEqual(s.original.Status, s.memcached.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, s.memcached, client.MergeFrom(s.original)); err != nil {
		return fmt.Errorf("patching status of Memcached %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	return nil
}

// SetupWithManager registers the controller. A Memcached is reconciled when
// its spec changes (not after each status write of its own). Pods are
// watched through their metadata only, for their names, and only when one
// appears, goes or starts terminating; they map to their Memcached by the
// instance label, since their owner is a ReplicaSet.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrentReconciles int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToMemcached),
			builder.OnlyMetadata, builder.WithPredicates(podMembershipChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Named("memcached").
		Complete(r)
}

// podMembershipChanged passes the pod events that can change status.nodes.
var podMembershipChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
}

func podToMemcached(_ context.Context, pod client.Object) []reconcile.Request {
	labels := pod.GetLabels()
	if labels[LabelManagedBy] != ManagedByValue || labels[LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: pod.GetNamespace(), Name: labels[LabelInstance]}}}
}
