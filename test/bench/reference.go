package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/policy"
)

// referenceFieldOwner is the reference's field manager.
const referenceFieldOwner = "bench-reference"

// referenceWrites is how the reference writes a fleet's objects.
type referenceWrites string

const (
	// writesCheapest is the cheapest correct client, the physical limit:
	// typed creates of new objects, then a JSON merge patch of only what
	// changed (a resize patches spec.replicas and nothing else).
	writesCheapest referenceWrites = "typed creates and merge patches"
	// writesApply sends the same objects whole through server-side apply,
	// as the operator does: what server-side apply itself costs.
	writesApply referenceWrites = "server-side apply"
	// writesPrompt is the cheapest client that also names a new generation
	// in the status as soon as its workload is written, as the operator
	// does within 5 s: one more status write a generation, what that rule
	// costs by itself.
	writesPrompt referenceWrites = "typed creates and merge patches, status at once"
)

// client is what the rows and the turns' log lines call the client that
// writes this way.
func (w referenceWrites) client() string {
	if w == writesPrompt {
		return "cheapest client with its status at once"
	}
	return "server-side apply client"
}

// reference is what the operator is compared with: a client that makes
// exactly the writes a fleet needs and nothing else, in one of two ways
// (referenceWrites). For a new fleet it writes the operator's own Deployment
// (a StatefulSet for stable fleets), Service and PodDisruptionBudget at once
// (same builders, same objects), then writes the status (referenceStatus)
// once, when the workload is rolled out and every pod is known; after a spec
// change, one workload write and one status write. It reads through
// informers like the operator and works with the same number of workers.
type reference struct {
	c       client.Client
	cache   cache.Cache
	ns      string
	workers int
	// stable: the fleets run on StatefulSets with warm restarts.
	stable bool
	writes referenceWrites
	queue  workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// applied and reported are, per fleet, the generation whose objects
	// were written and whose final status was written.
	applied, reported map[string]int64
	// workloads are, per fleet, the workload last written (writesCheapest
	// patches the difference from it).
	workloads map[string]client.Object
	errs      []error
}

func startReference(ctx context.Context, s *clusterState, ns string, workers int, stable bool, writes referenceWrites) (*reference, error) {
	cfg, err := restConfig(s, userReference)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cch, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	r := &reference{
		c: c, cache: cch, ns: ns, workers: workers, stable: stable, writes: writes,
		workloads: map[string]client.Object{},
		queue:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		applied:   map[string]int64{}, reported: map[string]int64{},
	}
	enqueue := func(name string) {
		if name != "" {
			r.queue.Add(name)
		}
	}
	handlers := map[client.Object]func(obj any) string{
		&cachev1alpha1.Memcached{}: func(obj any) string { return nameOf(obj) },
		workloadKind(stable):       func(obj any) string { return nameOf(obj) },
		podMeta(): func(obj any) string {
			if m, ok := obj.(metav1.Object); ok {
				return m.GetLabels()[desired.LabelInstance]
			}
			return ""
		},
	}
	for obj, key := range handlers {
		inf, err := cch.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(eventFuncs(func(o any) { enqueue(key(o)) })); err != nil {
			return nil, err
		}
	}
	go func() { _ = cch.Start(ctx) }()
	if !cch.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("reference cache did not sync")
	}
	for range workers {
		go r.work(ctx)
	}
	go func() { <-ctx.Done(); r.queue.ShutDown() }()
	return r, nil
}

func nameOf(obj any) string {
	if m, ok := obj.(metav1.Object); ok {
		return m.GetName()
	}
	return ""
}

func (r *reference) work(ctx context.Context) {
	for {
		key, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		if err := r.sync(ctx, key); err != nil {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
			r.queue.AddRateLimited(key)
		} else {
			r.queue.Forget(key)
		}
		r.queue.Done(key)
	}
}

func (r *reference) sync(ctx context.Context, name string) error {
	key := types.NamespacedName{Namespace: r.ns, Name: name}
	mc := &cachev1alpha1.Memcached{}
	if err := r.cache.Get(ctx, key, mc); err != nil {
		return client.IgnoreNotFound(err)
	}
	spec := *policy.Resolve(&mc.Spec, operatorDefaults)
	r.mu.Lock()
	applied, reported := r.applied[name], r.reported[name]
	r.mu.Unlock()
	if applied < mc.Generation {
		objects := map[string]runtime.ApplyConfiguration{"Deployment": desired.Deployment(mc, &spec)}
		if r.stable {
			objects = map[string]runtime.ApplyConfiguration{"StatefulSet": desired.StatefulSet(mc, &spec)}
		}
		if applied == 0 {
			objects["Service"] = desired.Service(mc, &spec)
			if pdb := desired.PodDisruptionBudget(mc, &spec); pdb != nil {
				objects["PodDisruptionBudget"] = pdb
			}
		}
		// At once, as the operator writes a fleet's objects: the same
		// concurrency budget, so the ratio compares requests, not scheduling.
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for kind, obj := range objects {
			wg.Go(func() {
				if err := r.write(ctx, name, kind, obj, applied == 0); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("reference: writing %s %s: %w", kind, name, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if r.writes == writesPrompt && reported < mc.Generation {
			named := mc.DeepCopy()
			promptStatus(named)
			if err := r.c.Status().Patch(ctx, named, client.MergeFrom(mc)); err != nil {
				return fmt.Errorf("reference: writing status of %s: %w", name, err)
			}
		}
		r.mu.Lock()
		r.applied[name] = mc.Generation
		r.mu.Unlock()
	}
	if reported >= mc.Generation {
		return nil
	}
	want := ptr.Deref(spec.Size, 0)
	replicas, ready, rolled, err := r.rolledOut(ctx, key, want)
	if err != nil || !rolled {
		return err // not rolled out: a later workload event brings the fleet back
	}
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := r.cache.List(ctx, pods, client.InNamespace(r.ns), client.MatchingLabels{desired.LabelInstance: name}); err != nil {
		return err
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			names = append(names, p.Name)
		}
	}
	if int32(len(names)) != want {
		return nil // the pod cache lags the workload's: a pod event brings it back
	}
	updated := mc.DeepCopy()
	referenceStatus(updated, replicas, ready, names)
	if r.stable {
		updated.Status.Servers = desired.Servers(mc, ptr.Deref(spec.Port, 0), names)
	}
	if err := r.c.Status().Patch(ctx, updated, client.MergeFrom(mc)); err != nil {
		return fmt.Errorf("reference: writing status of %s: %w", name, err)
	}
	r.mu.Lock()
	r.reported[name] = mc.Generation
	r.mu.Unlock()
	return nil
}

// write sends one of a fleet's objects: through server-side apply, or, for
// the cheapest client, as a typed create of a new fleet's object and a merge
// patch of what changed in its workload (nothing when nothing did).
func (r *reference) write(ctx context.Context, name, kind string, obj runtime.ApplyConfiguration, created bool) error {
	if r.writes == writesApply {
		return r.c.Apply(ctx, obj, client.FieldOwner(referenceFieldOwner), client.ForceOwnership)
	}
	typed, err := typedObject(kind, obj)
	if err != nil {
		return err
	}
	workload := kind == "Deployment" || kind == "StatefulSet"
	if created {
		if err := r.c.Create(ctx, typed, client.FieldOwner(referenceFieldOwner)); err != nil {
			return err
		}
	} else {
		r.mu.Lock()
		last := r.workloads[name]
		r.mu.Unlock()
		if !workload || last == nil {
			return fmt.Errorf("no %s of %s written before", kind, name)
		}
		patch := client.MergeFrom(last)
		data, err := patch.Data(typed)
		if err != nil {
			return err
		}
		if string(data) != "{}" {
			if err := r.c.Patch(ctx, typed, client.RawPatch(types.MergePatchType, data), client.FieldOwner(referenceFieldOwner)); err != nil {
				return err
			}
		}
	}
	if workload {
		// Built again rather than kept: the create and the patch filled
		// typed in with the server's defaults, which the next patch,
		// computed from it, would then remove.
		r.mu.Lock()
		r.workloads[name], _ = typedObject(kind, obj)
		r.mu.Unlock()
	}
	return nil
}

// typedObject is the typed object of one of the builders' apply
// configurations: the same fields, for a typed create or a merge patch.
func typedObject(kind string, obj runtime.ApplyConfiguration) (client.Object, error) {
	var out client.Object
	switch kind {
	case "Deployment":
		out = &appsv1.Deployment{}
	case "StatefulSet":
		out = &appsv1.StatefulSet{}
	case "Service":
		out = &corev1.Service{}
	case "PodDisruptionBudget":
		out = &policyv1.PodDisruptionBudget{}
	default:
		return nil, fmt.Errorf("no typed object for %s", kind)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return out, json.Unmarshal(data, out)
}

// rolledOut tells whether the fleet's workload runs want pods of its
// current generation, all available, and the replica counts its status gives.
func (r *reference) rolledOut(ctx context.Context, key types.NamespacedName, want int32) (replicas, ready int32, ok bool, err error) {
	obj := workloadKind(r.stable)
	if err := r.cache.Get(ctx, key, obj); err != nil {
		return 0, 0, false, client.IgnoreNotFound(err)
	}
	wl := workloadOf(obj)
	ok = wl.observed >= wl.generation && wl.want == want && wl.updated == want && wl.replicas == want && wl.available == want
	return wl.replicas, wl.ready, ok, nil
}

// errors returns the errors the reference met (retried; reported at the end).
func (r *reference) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// referenceStatus is the status the reference writes once per generation:
// what a client of the fleet reads (nodes, replica counts, selector, Ready,
// Available and Progressing for this generation). It is built here, not by
// the controller's status code, so that the reference stays a plain client.
func referenceStatus(mc *cachev1alpha1.Memcached, replicas, ready int32, pods []string) {
	st := &mc.Status
	st.Nodes = slices.Sorted(slices.Values(pods))
	st.Replicas, st.ReadyReplicas = replicas, ready
	st.Selector = desired.SelectorString(mc.Name)
	st.ObservedGeneration = mc.Generation
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: cachev1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: mc.Generation,
		Reason: cachev1alpha1.ReasonAllReplicasReady, Message: fmt.Sprintf("%d pods run the current spec and are available", len(pods)),
	})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: cachev1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, ObservedGeneration: mc.Generation,
		Reason: cachev1alpha1.ReasonAllReplicasReady, Message: fmt.Sprintf("%d/%d pods ready", len(pods), len(pods)),
	})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: cachev1alpha1.ConditionProgressing, Status: metav1.ConditionFalse, ObservedGeneration: mc.Generation,
		Reason: cachev1alpha1.ReasonRolloutComplete, Message: "the workload matches the spec",
	})
}

// promptStatus is the status writesPrompt writes with a generation's
// workload: it names the generation, and says the rollout is under way.
func promptStatus(mc *cachev1alpha1.Memcached) {
	st := &mc.Status
	st.Selector = desired.SelectorString(mc.Name)
	st.ObservedGeneration = mc.Generation
	for _, c := range []metav1.Condition{
		{Type: cachev1alpha1.ConditionReady, Status: metav1.ConditionFalse},
		{Type: cachev1alpha1.ConditionProgressing, Status: metav1.ConditionTrue},
	} {
		c.ObservedGeneration, c.Reason, c.Message = mc.Generation, cachev1alpha1.ReasonRollingOut, "the workload is rolling out"
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

// eventFuncs calls f on every add, update and delete.
func eventFuncs(f func(obj any)) toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f(obj) },
		UpdateFunc: func(_, obj any) { f(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			f(obj)
		},
	}
}
