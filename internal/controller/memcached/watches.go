package memcached

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/queue"
	"github.com/example/memcached-operator/internal/controller/status"
	"github.com/example/memcached-operator/internal/policy"
)

// SetupWithManager registers the controller. A Memcached is reconciled when
// its spec changes (not after each status write of its own) and when an
// owned object changes. The Service's EndpointSlices tell which pods serve;
// they are watched only for changes of that set. What follows a pass
// (followed) waits behind the fleets whose spec changed, but for the end
// of a rollout, which is what users wait for; updates of the
// Deployment and the slices are gathered for queue.Settle, so a rollout's
// bursts of updates cost one pass rather than one per update.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrentReconciles int) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podFleetIndex, indexPodFleet); err != nil {
		return fmt.Errorf("indexing pods by fleet: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &discoveryv1.EndpointSlice{}, sliceFleetIndex, indexSliceFleet); err != nil {
		return fmt.Errorf("indexing EndpointSlices by fleet: %w", err)
	}
	ownedBy := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &cachev1alpha1.Memcached{}, handler.OnlyControllerOwner())
	b := ctrl.NewControllerManagedBy(mgr)
	switch _, err := mgr.GetRESTMapper().RESTMapping(desired.CertificateGVK.GroupKind(), desired.CertificateGVK.Version); {
	case err == nil:
		// Metadata only: a status change bumps the resourceVersion, which
		// is all the requeue needs; the phase reads the object live.
		cert := &metav1.PartialObjectMetadata{}
		cert.SetGroupVersionKind(desired.CertificateGVK)
		b = b.WatchesMetadata(cert, ownedBy)
		r.watchesCertificates = true
	case !meta.IsNoMatchError(err):
		return fmt.Errorf("discovering %s: %w", desired.CertificateGVK, err)
	}
	b = b.For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, pausedChanged)))
	for _, w := range followed(ownedBy) {
		b = b.Watches(w.object, w.handler, builder.WithPredicates(w.predicates...))
	}
	return b.
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Named("memcached").
		Complete(r)
}

// pausedChanged passes an update that pauses or resumes a fleet: a change
// of metadata only, which the generation does not count.
var pausedChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return policy.Paused(e.ObjectOld.(*cachev1alpha1.Memcached)) != policy.Paused(e.ObjectNew.(*cachev1alpha1.Memcached))
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// watch is one kind the controller watches, and how.
type watch struct {
	object     client.Object
	handler    handler.EventHandler
	predicates []predicate.Predicate
}

// followed are the kinds whose changes only follow what a pass did: the
// owned objects, the Service's EndpointSlices (which pods serve) and the
// pods (which fit on no node, which are marked for a scale-down). Their
// creations and updates rank below a spec change (followUps), except the
// workload's update that ends a rollout; updates of the Deployment and the
// slices, a rollout's bursts, are gathered for queue.Settle.
func followed(ownedBy handler.EventHandler) []watch {
	return []watch{
		{object: &appsv1.Deployment{}, handler: queue.FollowUp{EventHandler: ownedBy, Settle: queue.Settle, Ends: rolloutEnded}},
		{object: &appsv1.StatefulSet{}, handler: queue.FollowUp{EventHandler: ownedBy, Settle: queue.Settle, Ends: rolloutEnded}},
		{object: &corev1.Service{}, handler: queue.FollowUps(ownedBy, 0)},
		{object: &policyv1.PodDisruptionBudget{}, handler: queue.FollowUps(ownedBy, 0)},
		{object: &networkingv1.NetworkPolicy{}, handler: queue.FollowUps(ownedBy, 0)},
		{object: &discoveryv1.EndpointSlice{}, handler: queue.FollowUps(handler.EnqueueRequestsFromMapFunc(sliceToMemcached), queue.Settle),
			predicates: []predicate.Predicate{readyPodsChanged}},
		{object: &corev1.Pod{}, handler: queue.FollowUps(handler.EnqueueRequestsFromMapFunc(podToMemcached), 0),
			predicates: []predicate.Predicate{podChanged}},
	}
}

// rolloutEnded is the workload's update from a rollout under way to one
// ended, whose pass turns the fleet Ready.
func rolloutEnded(old, updated client.Object) bool {
	return !status.RolledOut(old) && status.RolledOut(updated)
}

// readyPodsChanged passes the EndpointSlice events that can change
// status.nodes; address or port churn alone does not.
var readyPodsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldSlice, ok1 := e.ObjectOld.(*discoveryv1.EndpointSlice)
		newSlice, ok2 := e.ObjectNew.(*discoveryv1.EndpointSlice)
		return !ok1 || !ok2 || !slices.Equal(status.ReadyPods([]discoveryv1.EndpointSlice{*oldSlice}), status.ReadyPods([]discoveryv1.EndpointSlice{*newSlice}))
	},
}

// sliceToMemcached maps a slice to the fleet whose Service it belongs to;
// the Service has the Memcached's name.
func sliceToMemcached(_ context.Context, o client.Object) []reconcile.Request {
	labels := o.GetLabels()
	name := labels[discoveryv1.LabelServiceName]
	if labels[desired.LabelManagedBy] != desired.ManagedByValue || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// podChanged passes the pod events that can change what a pass does with
// pods: a pod becoming or ceasing to be unschedulable or held back by a
// configuration error (or its message changing), such a pod going away,
// a scale-down mark reaching the cache, and what the rollout of a fleet
// with warm restarts paces itself by. Every other pod event (IPs,
// other container states, readiness) is the EndpointSlices' and the
// Deployment's business.
var podChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return isWaiting(e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return waitingMessage(e.ObjectOld) != waitingMessage(e.ObjectNew) ||
			e.ObjectOld.GetAnnotations()[desired.PodDeletionCost] != e.ObjectNew.GetAnnotations()[desired.PodDeletionCost] ||
			warmRolloutState(e.ObjectOld) != warmRolloutState(e.ObjectNew)
	},
	DeleteFunc:  func(e event.DeleteEvent) bool { return isWaiting(e.Object) },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// waitingMessage says why a pod waits where status reports it: no node
// fits it, or the kubelet cannot create its memcached container.
func waitingMessage(o client.Object) string {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return ""
	}
	msg := ""
	if c := status.UnschedulableCondition(p); c != nil {
		msg = "unschedulable: " + c.Message
	}
	if m := status.AuthBlocked(p); m != "" {
		msg += "; config: " + m
	}
	return msg
}

func isWaiting(o client.Object) bool { return waitingMessage(o) != "" }

// podToMemcached maps a pod to its fleet by the instance label.
func podToMemcached(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[desired.LabelInstance]
	if o.GetLabels()[desired.LabelManagedBy] != desired.ManagedByValue || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// The cache answers a label selector by walking every object of the
// namespace, so with a thousand fleets in one namespace each pass walked
// every pod and EndpointSlice there. These indexes key the fleet's own
// objects by its name, so a pass lists only them.
const (
	podFleetIndex   = "memcached.fleet.pods"
	sliceFleetIndex = "memcached.fleet.endpointslices"
)

// indexPodFleet is the podFleetIndex of a pod: the fleet that manages it.
func indexPodFleet(o client.Object) []string {
	l := o.GetLabels()
	if name := l[desired.LabelInstance]; name != "" && l[desired.LabelManagedBy] == desired.ManagedByValue {
		return []string{name}
	}
	return nil
}

// indexSliceFleet is the sliceFleetIndex of an EndpointSlice: the fleet
// whose Service it belongs to.
func indexSliceFleet(o client.Object) []string {
	l := o.GetLabels()
	if name := l[discoveryv1.LabelServiceName]; name != "" && l[desired.LabelManagedBy] == desired.ManagedByValue {
		return []string{name}
	}
	return nil
}

// warmRolloutState is what desired.NextWarmStep reads of a pod of a fleet
// with warm restarts (its revision and readiness, memcached's image and
// command line, its container's readiness and restarts); empty for any other pod.
func warmRolloutState(o client.Object) string {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return ""
	}
	if _, warm := p.Annotations[desired.TemplateAnnotation]; !warm {
		return ""
	}
	state := fmt.Sprintf("%s/%t/%s/%s", p.Labels[appsv1.ControllerRevisionHashLabelKey], status.PodReady(p),
		p.Annotations[desired.ArgsAnnotation], p.Annotations[desired.RestartsAnnotation])
	for _, c := range p.Spec.Containers {
		state += "/" + c.Image + "/" + c.Resources.Limits.Memory().String()
	}
	for _, c := range p.Status.ContainerStatuses {
		state += fmt.Sprintf("/%s/%t/%d", c.Name, c.Ready, c.RestartCount)
		if c.Resources != nil {
			state += "/" + c.Resources.Limits.Memory().String()
		}
	}
	// A resize's progress.
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			state += fmt.Sprintf("/%s/%s/%s/%s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return state
}
