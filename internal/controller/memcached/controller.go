// Package memcached reconciles a Memcached into the objects that run it: a
// Deployment of memcached pods, a headless Service whose DNS name resolves to
// every ready pod (clients hash keys over those addresses), and, as the spec
// asks, a PodDisruptionBudget, a NetworkPolicy, a cert-manager Certificate
// and a ServiceMonitor. Each owned kind has a file with its pure builder and
// its phase. status.go computes the status from a pass's observation; it is
// written at the end of the pass (patchStatus), or, for the first pass of a
// new generation, while the Deployment's apply is in flight (announce.go).
package memcached

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
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
	// A report that is due also waits while other fleets wait for a worker.
	// 0 writes every change.
	ProgressInterval time.Duration

	// fleetMemory is what this process remembers of each fleet between
	// passes.
	fleetMemory
	// backlog is how many fleets wait for a worker: the length of the queue
	// the controller makes when it starts (newQueue); unset counts none.
	backlog atomic.Pointer[func() int]
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

func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// scope is what one pass knows: the object as read, the object being
// updated, and what the phases observed on the way.
type scope struct {
	original  *cachev1alpha1.Memcached
	memcached *cachev1alpha1.Memcached
	// spec is memcached.Spec resolved (defaults and derived values filled
	// in); builders read only this.
	spec *cachev1alpha1.MemcachedSpec
	// invalid holds the rules the spec breaks; nothing is built then.
	invalid field.ErrorList
	// kept holds the rules it breaks as it did when it was last built,
	// which do not stop it being built (acceptedRules).
	kept field.ErrorList
	// current is the Deployment as the cache held it when the pass began;
	// nil when there was none.
	current *appsv1.Deployment
	// deployment is the Deployment as the API server last returned it this
	// pass; nil when the pass did not observe it.
	deployment *appsv1.Deployment
	// nodes are the ready pods; nodesObserved is false when listing failed.
	nodes         []string
	nodesObserved bool
	// unschedulable counts the pods no node fits, with the scheduler's
	// message for one of them.
	unschedulable    int
	unschedulableMsg string
	// auth is what the fleet's pods say of its auth Secret; nil when the
	// fleet has no spec.auth or its pods were not observed.
	auth *authState
	// tls is what the Certificate phase found; nil when the fleet neither
	// enables TLS nor had a Certificate.
	tls *certState
	// monitoring is what the ServiceMonitor phase found; nil when the fleet
	// neither asks for a ServiceMonitor nor had one.
	monitoring *monitoringState
	// created holds the kinds this pass created (kind → true); the owned
	// object phases run at once and share it.
	createdMu sync.Mutex
	created   map[string]bool
	// heldFor is set when a progress-only status change was held back: the
	// pass asks to run again then, when it is due.
	heldFor time.Duration
	// announced receives the fleet as the status write of announceRollout
	// left it, or nil; nil when there was none.
	announced chan *cachev1alpha1.Memcached
}

func (s *scope) markCreated(kind string) {
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	if s.created == nil {
		s.created = map[string]bool{}
	}
	s.created[kind] = true
}

// statusWrite is a status this process wrote: when, what, and the
// resourceVersion of the object it was computed over.
type statusWrite struct {
	at     time.Time
	over   string
	status *cachev1alpha1.MemcachedStatus
}

type phase func(ctx context.Context, s *scope) error

// ownedPhases each write one owned kind and read nothing another writes
// (the Deployment phase also marks pods for a scale-down, and may write the
// status from inside its apply: announce.go), so a pass runs them at once:
// a new fleet's objects then cost the time of the slowest one's requests
// rather than the sum of all of them, which is most of how long a worker
// spends on a fleet when the API server is busy.
var ownedPhases = []struct {
	name string
	run  func(r *Reconciler) phase
}{
	{"deployment", func(r *Reconciler) phase { return r.reconcileDeployment }},
	{"service", func(r *Reconciler) phase { return r.reconcileService }},
	{"poddisruptionbudget", func(r *Reconciler) phase { return r.reconcilePodDisruptionBudget }},
	{"servicemonitor", func(r *Reconciler) phase { return r.reconcileServiceMonitor }},
	{"networkpolicy", func(r *Reconciler) phase { return r.reconcileNetworkPolicy }},
}

// createdKinds lists what a pass created in the order the objects are
// described everywhere else.
func (s *scope) createdKinds() []string {
	var kinds []string
	for _, k := range []string{"Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor", "NetworkPolicy", "Certificate"} {
		if s.created[k] {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
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
	s := &scope{original: mc.DeepCopy(), memcached: mc, spec: policy.Resolve(&mc.Spec, r.Defaults)}

	run := func(name string, p phase) error {
		err := p(ctx, s)
		if err != nil && !errors.Is(err, errNamespaceTerminating) {
			reconcileErrors.WithLabelValues(name, classify([]error{err}).reason).Inc()
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
	terminating := false
	for _, err := range errs {
		switch {
		case errors.Is(err, errNamespaceTerminating):
			terminating = true
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

	f := classify(reported)
	before := slices.Clone(s.memcached.Status.Conditions)
	s.takeAnnounced()
	r.updateStatus(s, reported, before)
	if err := r.patchStatus(ctx, s); err != nil {
		return ctrl.Result{}, errors.Join(append(reported, err)...)
	}
	switch {
	case f.transient:
		return ctrl.Result{}, errors.Join(reported...)
	case f.reason == cachev1alpha1.ReasonNameConflict:
		return ctrl.Result{RequeueAfter: r.recheck()}, nil
	case f.stalled:
		// Retrying cannot help until the spec changes, which requeues on its own.
		return ctrl.Result{}, reconcile.TerminalError(errors.Join(reported...))
	}
	var after time.Duration
	if s.monitoring != nil && s.monitoring.apiMissing {
		// Nothing announces a CRD being installed; look again.
		after = r.recheck()
	}
	if t := s.tls; t != nil && t.wanted && !r.watchesCertificates {
		// Nothing announces cert-manager's CRDs being installed, nor, without
		// the watch that needs them at start, a Certificate's change: look
		// again, soon while it is being issued.
		after = r.recheck()
		if !t.apiMissing && !t.ready {
			after = min(after, certRecheck)
		}
	}
	if s.heldFor > 0 && (after == 0 || s.heldFor < after) {
		// Only a report of progress is due then: behind every other fleet.
		return ctrl.Result{RequeueAfter: s.heldFor, Priority: ptr.To(handler.LowPriority)}, nil
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
	dep := &appsv1.Deployment{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.memcached), dep); {
	case err == nil && metav1.IsControlledBy(dep, s.memcached):
		// Only the fleet's own: a Deployment with its name and labels that it
		// does not control (a deleted namesake's orphan, an imitation) gives
		// it neither pods to report or mark nor a size to ratchet against.
		current = ptr.To(ptr.Deref(dep.Spec.Replicas, 1))
		s.current = dep
	case err == nil:
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading Deployment %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	s.invalid, s.kept = policy.Check(s.memcached, s.spec, acceptedRules(s))
	s.invalid = append(s.invalid, policy.ValidateSize(field.NewPath("spec", "size"), s.memcached.Spec.Size, current, r.Limits)...)
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
	if s.current == nil {
		return nil
	}
	if v, ok := s.current.Annotations[AcceptedRulesAnnotation]; ok {
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

func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	if apiequality.Semantic.DeepEqual(s.original.Status, s.memcached.Status) {
		return nil
	}
	key := client.ObjectKeyFromObject(s.memcached)
	now := r.clock()
	var last *statusWrite
	if v, ok := r.lastWrite.Load(key); ok {
		last = v.(*statusWrite)
	}
	// A pass that runs before this process's own last status write has
	// reached the cache reads the object that write was computed over, and
	// would send the same status again.
	if last != nil && last.over == s.original.ResourceVersion && apiequality.Semantic.DeepEqual(last.status, &s.memcached.Status) {
		return nil
	}
	if r.ProgressInterval > 0 && StartOnly(&s.original.Status, &s.memcached.Status) {
		if wait := r.holdStart(key, s.memcached.Status.ObservedGeneration, now); wait > 0 {
			s.heldFor = wait
			return nil
		}
	}
	cause := statusChange
	if r.ProgressInterval > 0 && last != nil && ProgressOnly(&s.original.Status, &s.memcached.Status) {
		wait := r.ProgressInterval - now.Sub(last.at)
		if wait <= 0 && r.backlogged() {
			// Other fleets wait for a worker, and a report of progress would
			// keep this one from them for a round trip. At a thousand fleets
			// resized at once none was written while the queue was full,
			// and a fleet cost 2.55 status writes instead of 2.84. It waits
			// for a queue with no one waiting, or for the fleet's next
			// transition, written at once.
			wait = r.ProgressInterval
		}
		if wait > 0 {
			s.heldFor = wait
			return nil
		}
		cause = statusProgress
	}
	over := s.original.ResourceVersion
	if err := r.Client.Status().Patch(ctx, s.memcached, client.MergeFrom(s.original)); err != nil {
		return fmt.Errorf("patching status of Memcached %s: %w", key, err)
	}
	statusWrites.WithLabelValues(cause).Inc()
	r.lastWrite.Store(key, &statusWrite{at: now, over: over, status: s.memcached.Status.DeepCopy()})
	r.startHeld.Delete(key)
	if log := ctrl.LoggerFrom(ctx).V(1); log.Enabled() {
		log.Info("Wrote status", "ready", conditionSummary(&s.memcached.Status, cachev1alpha1.ConditionReady),
			"was", conditionSummary(&s.original.Status, cachev1alpha1.ConditionReady),
			"readyReplicas", s.memcached.Status.ReadyReplicas, "nodes", len(s.memcached.Status.Nodes),
			"changed", StatusChanges(&s.original.Status, &s.memcached.Status))
	}
	return nil
}

// heldStart is a fleet's report of a new generation held since a time.
type heldStart struct {
	generation int64
	since      time.Time
}

// holdStart is how much longer a report that a fleet took up generation
// gen (StartOnly) waits: while other fleets wait for a worker, a first
// report would keep them from it for a round trip, and the API server
// from their rollouts for a write, to tell nobody anything they act on.
// After one ProgressInterval from its first hold, the fleet's next pass
// writes it, backlog or not, so that a fleet whose rollout is slow still
// says that its change was taken up; that pass comes behind the fleets
// waiting (the held pass is requeued at LowPriority). One whose rollout
// ends sooner reports the end instead, and a failure is written at once.
// Without a backlog it is written at once.
func (r *Reconciler) holdStart(key types.NamespacedName, gen int64, now time.Time) time.Duration {
	if !r.backlogged() {
		return 0
	}
	h := heldStart{generation: gen, since: now}
	if v, ok := r.startHeld.Load(key); ok && v.(heldStart).generation == gen {
		h = v.(heldStart)
	} else {
		r.startHeld.Store(key, h)
	}
	return max(r.ProgressInterval-now.Sub(h.since), 0)
}

// backlogged: other fleets wait for a worker.
func (r *Reconciler) backlogged() bool {
	n := r.backlog.Load()
	return n != nil && (*n)() > 0
}

// SetupWithManager registers the controller. A Memcached is reconciled when
// its spec changes (not after each status write of its own) and when an
// owned object changes. The Service's EndpointSlices tell which pods serve;
// they are watched only for changes of that set. What follows a pass
// (followed) waits behind the fleets whose spec changed, and updates of the
// Deployment and the slices are gathered for statusSettle, so a rollout's
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
	switch _, err := mgr.GetRESTMapper().RESTMapping(CertificateGVK.GroupKind(), CertificateGVK.Version); {
	case err == nil:
		// Metadata only: a status change bumps the resourceVersion, which
		// is all the requeue needs; the phase reads the object live.
		cert := &metav1.PartialObjectMetadata{}
		cert.SetGroupVersionKind(CertificateGVK)
		b = b.WatchesMetadata(cert, ownedBy)
		r.watchesCertificates = true
	case !meta.IsNoMatchError(err):
		return fmt.Errorf("discovering %s: %w", CertificateGVK, err)
	}
	b = b.For(&cachev1alpha1.Memcached{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	for _, w := range followed(ownedBy) {
		b = b.Watches(w.object, w.handler, builder.WithPredicates(w.predicates...))
	}
	return b.
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles, NewQueue: r.newQueue(mgr.GetLogger())}).
		Named("memcached").
		Complete(r)
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
// creations and updates rank below a spec change (followUps); updates of
// the Deployment and the slices, a rollout's bursts, are gathered for
// statusSettle.
func followed(ownedBy handler.EventHandler) []watch {
	return []watch{
		{object: &appsv1.Deployment{}, handler: followUps(ownedBy, statusSettle)},
		{object: &corev1.Service{}, handler: followUps(ownedBy, 0)},
		{object: &policyv1.PodDisruptionBudget{}, handler: followUps(ownedBy, 0)},
		{object: &networkingv1.NetworkPolicy{}, handler: followUps(ownedBy, 0)},
		{object: &discoveryv1.EndpointSlice{}, handler: followUps(handler.EnqueueRequestsFromMapFunc(sliceToMemcached), statusSettle),
			predicates: []predicate.Predicate{readyPodsChanged}},
		{object: &corev1.Pod{}, handler: followUps(handler.EnqueueRequestsFromMapFunc(podToMemcached), 0),
			predicates: []predicate.Predicate{podChanged}},
	}
}

// newQueue makes controller-runtime's own default queue (a priority queue),
// keeping its length for the backlog. The controller calls it when it
// starts, before its workers.
func (r *Reconciler) newQueue(log logr.Logger) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
			o.Log = log.WithValues("controller", name)
			o.RateLimiter = limiter
		})
		n := q.Len
		r.backlog.Store(&n)
		return q
	}
}

// conditionSummary is "Status/Reason" of a condition, for debug logs.
func conditionSummary(st *cachev1alpha1.MemcachedStatus, t string) string {
	c := meta.FindStatusCondition(st.Conditions, t)
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason
}
