// Package memcached is the reconciler: it runs the phases of one pass over a
// Memcached (validate, then the Certificate, then the owned objects at once,
// then the observations of endpoints and pods), computes the status once
// and writes it once, and wires the controller's watches. What the objects
// should be is package desired's; how they are written, package apply's;
// what the status says, package status's; how work is ranked, package
// queue's. Every write the operator makes goes through this package.
package memcached

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/status"
	"github.com/example/memcached-operator/internal/policy"
)

// defaultRecheck is how often a fleet waiting on something no event
// announces is looked at again: someone else's object in the way (it has no
// owner reference to requeue the fleet), or the ServiceMonitor API.
const defaultRecheck = time.Minute

// Reconciler keeps a Memcached's owned objects equal to its spec and reports
// what it observes in its status.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, bypassing the cache; it confirms a
	// cache miss before an object is created. Defaults to Client.
	APIReader client.Reader
	// Recorder emits events on state transitions.
	Recorder recorder.EventRecorder
	// Defaults resolve a copy of the spec before building, so the operator
	// behaves the same when its mutating webhook is off.
	Defaults policy.Config
	// Limits are checked again before building, so --max-size holds where
	// the validating webhook does not run.
	Limits policy.Limits
	// Recheck is how often a fleet waiting on a name conflict or on the
	// ServiceMonitor API is looked at again; 0 means a minute.
	Recheck time.Duration
	// ProgressInterval is the least time between two status writes of a
	// fleet that only report a rollout's progress (ProgressOnly): a rollout
	// then costs its transitions, not one write per pod that becomes ready.
	// 0 writes every change.
	ProgressInterval time.Duration
	// ProgressRate is how many such writes a second all fleets together
	// send at most (a second's worth at once); 0 does not limit them.
	ProgressRate float64

	// objects writes the owned objects and statuses writes the status; both
	// are made on first use from the fields above, and remember what they
	// need of each fleet between passes (forget drops it).
	parts    sync.Once
	objects  *apply.Applier
	statuses *statusWriter
	// watchesCertificates: cert-manager's API was served when the manager
	// started, so a Certificate's changes requeue its fleet. Without it, a
	// TLS fleet is looked at again every Recheck.
	watchesCertificates bool
	// now is time.Now, replaceable in tests.
	now func() time.Time
}

func (r *Reconciler) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

func (r *Reconciler) init() {
	r.parts.Do(func() {
		r.objects = &apply.Applier{Client: r.Client, APIReader: r.APIReader}
		r.statuses = &statusWriter{interval: r.ProgressInterval, budget: progressBudget(r.ProgressRate), now: r.clock}
	})
}

func (r *Reconciler) applier() *apply.Applier {
	r.init()
	return r.objects
}

func (r *Reconciler) writer() *statusWriter {
	r.init()
	return r.statuses
}

// forget drops everything this process remembers of a fleet that is gone,
// so a fleet recreated under its name starts from nothing.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.applier().Forget(key)
	r.writer().forget(key)
}

// remembers names what this process remembers of a fleet, for tests.
func (r *Reconciler) remembers(key types.NamespacedName) []string {
	return append(r.applier().Remembers(key), r.writer().remembers(key)...)
}

// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=core,resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list;watch
// +kubebuilder:rbac:groups=core,resources=pods,verbs=list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;patch;delete

// Reconcile validates the spec; only a valid one is built: the Certificate
// first (the Deployment waits for it), then the owned phases at once, where
// one failing does not stop the others. The endpoint and pod observations
// always run. The status is then written once, and only when it changed. A
// pass over a fleet that already matches its spec sends no write request.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mc := &cachev1alpha1.Memcached{}
	if err := r.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !mc.DeletionTimestamp.IsZero() {
		// Owner references hand the children to the garbage collector.
		return ctrl.Result{}, nil
	}
	if policy.Paused(mc) {
		// Nothing is read or written but the Paused condition, once: the
		// fleet's objects are the user's until the annotation goes.
		read := mc.DeepCopy()
		status.Pause(mc)
		_, err := r.writer().write(ctx, r.Client, read, mc)
		return ctrl.Result{}, err
	}
	s := &scope{original: mc.DeepCopy(), memcached: mc, spec: policy.Resolve(&mc.Spec, r.Defaults)}

	run := func(name string, p phase) error {
		err := p(ctx, s)
		if err != nil && !errors.Is(err, apply.ErrNamespaceTerminating) && !errors.Is(err, apply.ErrCacheBehind) {
			reconcileErrors.WithLabelValues(name, status.Classify([]error{err}).Reason).Inc()
		}
		return err
	}
	// Nothing is built from a spec that breaks a rule, or that could not be
	// checked against the running Deployment.
	errs := []error{run("validate", r.validate)}
	switch {
	case errs[0] != nil:
	case len(s.invalid) > 0:
		reconcileErrors.WithLabelValues("validate", cachev1alpha1.ReasonInvalidSpec).Inc()
	default:
		// The Deployment phase needs to know whether the Certificate is Ready.
		if err := run("certificate", r.reconcileCertificate); err != nil {
			errs = append(errs, err)
			break
		}
		owned := make([]error, len(ownedPhases))
		var wg sync.WaitGroup
		for i, p := range ownedPhases {
			wg.Go(func() { owned[i] = run(p.name, p.run(r)) })
		}
		wg.Wait()
		errs = append(errs, owned...)
	}
	errs = append(errs, run("endpoints", r.observeEndpoints), run("pods", r.observePods))

	var reported []error
	terminating, behind := false, false
	for _, err := range errs {
		switch {
		case errors.Is(err, apply.ErrNamespaceTerminating):
			terminating = true
		case errors.Is(err, apply.ErrCacheBehind):
			behind = true
		case err != nil:
			reported = append(reported, err)
		}
	}
	if terminating {
		// The namespace controller is deleting the fleet with everything
		// else; recreating what it removed would only fail again.
		ctrl.LoggerFrom(ctx).V(1).Info("Namespace is terminating; leaving the fleet to it")
		return ctrl.Result{}, nil
	}
	if behind {
		// A status computed from this cache would describe the fleet before
		// the last pass. The object's creation event brings the fleet back;
		// the requeue only covers an object deleted before the cache saw it.
		ctrl.LoggerFrom(ctx).V(1).Info("Cache behind this process's own creations; waiting for it")
		return ctrl.Result{RequeueAfter: apply.CacheWait}, nil
	}

	f := status.Classify(reported)
	before := slices.Clone(s.memcached.Status.Conditions)
	r.report(s, reported, before)
	held, err := r.writer().write(ctx, r.Client, s.original, s.memcached)
	if err != nil {
		return ctrl.Result{}, errors.Join(append(reported, err)...)
	}
	switch {
	case f.Transient:
		return ctrl.Result{}, errors.Join(reported...)
	case f.Reason == cachev1alpha1.ReasonNameConflict:
		return ctrl.Result{RequeueAfter: r.recheck()}, nil
	case f.Stalled:
		// Retrying cannot help until the spec changes, which requeues on its own.
		return ctrl.Result{}, reconcile.TerminalError(errors.Join(reported...))
	}
	var after time.Duration
	if s.monitoring != nil && s.monitoring.APIMissing {
		// Nothing announces a CRD being installed; look again.
		after = r.recheck()
	}
	if t := s.tls; t != nil && t.Wanted && !r.watchesCertificates {
		// Nothing announces cert-manager's CRDs being installed, nor, without
		// the watch that needs them at start, a Certificate's change: look
		// again, soon while it is being issued.
		after = r.recheck()
		if !t.APIMissing && !t.Ready {
			after = min(after, certRecheck)
		}
	}
	if held > 0 && (after == 0 || held < after) {
		// Only a report of progress is due then: behind every other fleet.
		return ctrl.Result{RequeueAfter: held, Priority: ptr.To(handler.LowPriority)}, nil
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func (r *Reconciler) recheck() time.Duration {
	if r.Recheck > 0 {
		return r.Recheck
	}
	return defaultRecheck
}

// validate holds the spec to the same rules as admission, so they apply
// where the webhooks do not run (excluded namespaces, `make run`, a webhook
// bypassed with failurePolicy Ignore). --max-size ratchets against the
// Deployment's replicas: a fleet above a lowered cap keeps running and may
// shrink, but is never grown past it.
func (r *Reconciler) validate(ctx context.Context, s *scope) error {
	var current *int32
	if err := r.readWorkload(ctx, s); err != nil {
		return err
	}
	if _, replicas, ok := s.currentWorkload(); ok {
		current = &replicas
	}
	s.invalid, s.kept = policy.Check(s.memcached, s.spec, acceptedRules(s))
	s.invalid = append(s.invalid, policy.ValidateSize(field.NewPath("spec", "size"), s.memcached.Spec.Size, current, r.Limits)...)
	return nil
}

// readWorkload reads the fleet's Deployment or StatefulSet from the cache.
// Only the fleet's own counts: one with its name and labels that it does
// not control (a deleted namesake's orphan, an imitation) gives it neither
// pods to report or mark nor a size to ratchet against.
func (r *Reconciler) readWorkload(ctx context.Context, s *scope) error {
	var obj client.Object = &appsv1.Deployment{}
	if s.stable() {
		obj = &appsv1.StatefulSet{}
	}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.memcached), obj); {
	case err == nil && metav1.IsControlledBy(obj, s.memcached):
		switch o := obj.(type) {
		case *appsv1.Deployment:
			s.current = o
		case *appsv1.StatefulSet:
			s.currentSet = o
		}
	case err == nil, apierrors.IsNotFound(err):
	default:
		return fmt.Errorf("reading %T %s: %w", obj, client.ObjectKeyFromObject(s.memcached), err)
	}
	return nil
}

// AcceptedRulesAnnotation is the annotation of a fleet's Deployment that
// lists the rules (policy.RuleKey) its spec broke when it was last built:
// rules tightened since it was admitted, which keep it reconciled while it
// breaks them as it did, as admission lets its other edits through.
const AcceptedRulesAnnotation = "memcached.cache.example.com/accepted-rules"

// acceptedRules tells which rules the fleet may go on breaking: those
// recorded on its Deployment; or, on a Deployment an operator before this
// record built, every rule, if that operator built this very generation (the
// status observed it and did not find it invalid).
func acceptedRules(s *scope) func(*field.Error) bool {
	annotations, _, ok := s.currentWorkload()
	if !ok {
		return nil
	}
	if v, ok := annotations[AcceptedRulesAnnotation]; ok {
		keys := strings.Split(v, ",")
		return func(e *field.Error) bool { return slices.Contains(keys, policy.RuleKey(e)) }
	}
	mc := s.memcached
	degraded := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionDegraded)
	if mc.Status.ObservedGeneration != mc.Generation || degraded == nil || degraded.Reason == cachev1alpha1.ReasonInvalidSpec {
		return nil
	}
	return func(*field.Error) bool { return true }
}
