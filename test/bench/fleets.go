package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
)

// userConcurrency is how many requests the bench, playing the user, makes
// at once to create, patch or delete fleets: the same for the operator's
// and the reference's runs.
const userConcurrency = 16

func fleetName(i int) string { return fmt.Sprintf("cache-%04d", i) }

// createNamespace makes ns, labelled for the bench's webhooks.
func createNamespace(ctx context.Context, c client.Client, ns string) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{admittedLabel: "true"}}}
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return pollFor(ctx, "default ServiceAccount in "+ns, time.Minute, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	})
}

// deleteNamespace deletes ns and waits until it is gone (its pods deleted by
// kwok, its objects by the garbage collector and the namespace controller).
func deleteNamespace(ctx context.Context, c client.Client, ns string, timeout time.Duration) error {
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return err
	}
	return pollFor(ctx, "namespace "+ns+" gone", timeout, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// staleWebhookConnRetries counts the user's writes the bench sent a second
// time because the API server's call to a webhook failed on a connection
// the webhook server had already closed. The API server makes the call
// once; a user of kubectl answers by trying again. The table prints it.
var staleWebhookConnRetries atomic.Int64

// isStaleWebhookConn reports whether err is the API server failing to call
// a webhook over a connection the other end had closed.
func isStaleWebhookConn(err error) bool {
	if !apierrors.IsInternalError(err) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "failed calling webhook") &&
		(strings.Contains(msg, "write: broken pipe") || strings.Contains(msg, "connection reset by peer") || strings.HasSuffix(msg, ": EOF"))
}

// userWrite makes one of the user's writes, sent once more when the API
// server's webhook call met a closed connection: the write was refused in
// admission, so nothing was stored and a second try is safe.
func userWrite(what string, write func() error) error {
	err := write()
	if isStaleWebhookConn(err) {
		staleWebhookConnRetries.Add(1)
		logf("%s: the API server's webhook call met a closed connection; trying once more: %v", what, err)
		err = write()
	}
	return err
}

// parallel runs f(0..n-1) with at most userConcurrency at once and returns
// the first error.
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	next := make(chan int)
	for range min(userConcurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// createFleets creates n Memcacheds of size in ns, as a user would; stable
// ones run on a StatefulSet with warm restarts.
func createFleets(ctx context.Context, c client.Client, ns string, n int, size int32, stable bool) error {
	return parallel(ctx, n, func(ctx context.Context, i int) error {
		mc := &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: fleetName(i), Namespace: ns},
			Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To(size)},
		}
		if stable {
			mc.Spec.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
			// kwok runs no container: any launcher image does, and the
			// bench's operator has no --exporter-image to default it from.
			mc.Spec.WarmRestart = &cachev1alpha1.WarmRestartSpec{Enabled: true, LauncherImage: ptr.To("memcached-operator:bench")}
		}
		if err := userWrite("creating Memcached "+mc.Name, func() error { return c.Create(ctx, mc) }); err != nil {
			return fmt.Errorf("creating Memcached %s: %w", mc.Name, err)
		}
		return nil
	})
}

// resizeFleets patches spec.size of every fleet.
func resizeFleets(ctx context.Context, c client.Client, ns string, n int, size int32) error {
	return parallel(ctx, n, func(ctx context.Context, i int) error {
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: fleetName(i), Namespace: ns}}
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"size":%d}}`, size))
		if err := userWrite("resizing Memcached "+mc.Name, func() error { return c.Patch(ctx, mc, patch) }); err != nil {
			return fmt.Errorf("resizing Memcached %s: %w", mc.Name, err)
		}
		return nil
	})
}

// watcher keeps the bench's own view of one namespace (Memcacheds, pods,
// Deployments or StatefulSets, EndpointSlices) in an informer cache, so waiting on thousands of fleets costs
// no list requests. It reads it ten times a second while a phase runs, and
// its lists share the cache's objects (UnsafeDisableDeepCopy: nothing here
// writes to them): copying every pod, workload and slice of a thousand
// fleets at each poll took CPU from the machine the operator and the
// reference are measured on.
type watcher struct {
	ns    string
	cache cache.Cache
	stop  context.CancelFunc
	// stable: the fleets run on StatefulSets, not Deployments.
	stable bool
}

func newWatcher(ctx context.Context, s *clusterState, ns string, stable bool) (*watcher, error) {
	cfg, err := restConfig(s, userAdmin)
	if err != nil {
		return nil, err
	}
	cch, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{ns: ns, cache: cch, stop: cancel, stable: stable}
	if _, err := cch.GetInformer(ctx, &cachev1alpha1.Memcached{}); err != nil {
		cancel()
		return nil, err
	}
	// Full pods and workloads: after churn a fleet is restored only when
	// its pods are Ready and its workload available again. EndpointSlices:
	// when the cluster's second pipeline (pods → endpointslice controller)
	// has listed a fleet's pods, which is what its clients resolve.
	for _, obj := range []client.Object{&corev1.Pod{}, workloadKind(stable), &discoveryv1.EndpointSlice{}} {
		if _, err := cch.GetInformer(ctx, obj); err != nil {
			cancel()
			return nil, err
		}
	}
	go func() { _ = cch.Start(ctx) }()
	if !cch.WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("bench cache of %s did not sync", ns)
	}
	return w, nil
}

func podMeta() *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{}
	p.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return p
}

// livePods maps each fleet to the names of its pods that are not being deleted.
func (w *watcher) livePods(ctx context.Context) (map[string][]string, error) {
	live, _, err := w.podState(ctx)
	return live, err
}

// podState is livePods, plus the fleets that are not restored in the
// cluster: a live pod not Ready, or a workload not fully available.
func (w *watcher) podState(ctx context.Context) (live map[string][]string, unrestored map[string]bool, err error) {
	pods := &corev1.PodList{}
	if err := w.cache.List(ctx, pods, client.InNamespace(w.ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	live, unrestored = map[string][]string{}, map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		inst := p.Labels[desired.LabelInstance]
		live[inst] = append(live[inst], p.Name)
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if !ready {
			unrestored[inst] = true
		}
	}
	workloads, err := w.workloads(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, wl := range workloads {
		if wl.observed < wl.generation || wl.available != wl.want || wl.replicas != wl.want {
			unrestored[wl.name] = true
		}
	}
	return live, unrestored, nil
}

// fleetReady is the bench's definition of a converged fleet: its spec asks
// for size pods (so a cache that has not yet seen the user's patch never
// passes for the old spec), the status describes the current generation,
// Ready (the rollout is complete) is True for it, and status.nodes names
// size pods. With pods,
// status.nodes must also equal the fleet's live pods (after churn, the
// replacements).
func fleetReady(mc *cachev1alpha1.Memcached, size int32, pods []string) bool {
	if ptr.Deref(mc.Spec.Size, 1) != size || mc.Status.ObservedGeneration != mc.Generation || int32(len(mc.Status.Nodes)) != size || mc.Status.ReadyReplicas != size {
		return false
	}
	c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != mc.Generation {
		return false
	}
	if pods == nil {
		return true
	}
	live := slices.Clone(pods)
	sort.Strings(live)
	return slices.Equal(live, mc.Status.Nodes)
}

// workload is what the bench reads of a fleet's Deployment or StatefulSet.
type workload struct {
	name                                      string
	want, replicas, ready, updated, available int32
	generation, observed                      int64
}

// workloadOf reads a Deployment or a StatefulSet.
func workloadOf(obj runtime.Object) workload {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		st := o.Status
		return workload{o.Name, ptr.Deref(o.Spec.Replicas, 1), st.Replicas, st.ReadyReplicas, st.UpdatedReplicas, st.AvailableReplicas, o.Generation, st.ObservedGeneration}
	case *appsv1.Deployment:
		st := o.Status
		return workload{o.Name, ptr.Deref(o.Spec.Replicas, 1), st.Replicas, st.ReadyReplicas, st.UpdatedReplicas, st.AvailableReplicas, o.Generation, st.ObservedGeneration}
	}
	return workload{}
}

// workloadKind is an empty Deployment, or StatefulSet for stable fleets.
func workloadKind(stable bool) client.Object {
	if stable {
		return &appsv1.StatefulSet{}
	}
	return &appsv1.Deployment{}
}

// workloads are the fleets' Deployments, or StatefulSets for stable fleets,
// as the cache holds them.
func (w *watcher) workloads(ctx context.Context) ([]workload, error) {
	var list client.ObjectList = &appsv1.DeploymentList{}
	if w.stable {
		list = &appsv1.StatefulSetList{}
	}
	if err := w.cache.List(ctx, list, client.InNamespace(w.ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []workload
	err := meta.EachListItem(list, func(obj runtime.Object) error {
		out = append(out, workloadOf(obj))
		return nil
	})
	return out, err
}

// rolledOut reports the fleets whose workload runs size pods of its
// current generation, all available: the cluster's part is done, whatever
// the fleet's status says yet.
func (w *watcher) rolledOut(ctx context.Context, size int32) (map[string]bool, error) {
	return w.workloadsWhere(ctx, func(wl workload) bool {
		return wl.want == size && wl.observed >= wl.generation &&
			wl.replicas == size && wl.updated == size && wl.available == size
	})
}

// workloadsAsking reports the fleets whose workload asks for size pods.
func (w *watcher) workloadsAsking(ctx context.Context, size int32) (map[string]bool, error) {
	return w.workloadsWhere(ctx, func(wl workload) bool { return wl.want == size })
}

// workloadsWhere reports the fleets whose cached workload passes keep.
func (w *watcher) workloadsWhere(ctx context.Context, keep func(workload) bool) (map[string]bool, error) {
	all, err := w.workloads(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, wl := range all {
		if keep(wl) {
			out[wl.name] = true
		}
	}
	return out, nil
}

// endpointsListed reports the fleets whose Service's EndpointSlices list size
// ready endpoints: the moment a client resolving the headless Service sees
// every server, and the earliest a status.nodes read from them can be whole.
func (w *watcher) endpointsListed(ctx context.Context, size int32) (map[string]bool, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := w.cache.List(ctx, list, client.InNamespace(w.ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	ready := map[string]map[string]bool{}
	for i := range list.Items {
		sl := &list.Items[i]
		svc := sl.Labels[discoveryv1.LabelServiceName]
		for _, ep := range sl.Endpoints {
			if ep.TargetRef == nil || !ptr.Deref(ep.Conditions.Ready, false) {
				continue
			}
			if ready[svc] == nil {
				ready[svc] = map[string]bool{}
			}
			ready[svc][ep.TargetRef.Name] = true
		}
	}
	out := map[string]bool{}
	for svc, pods := range ready {
		if int32(len(pods)) == size {
			out[svc] = true
		}
	}
	return out, nil
}

// converged is when each fleet became ready (by its status, relative to t0,
// sorted), and the lag of each behind its workload's rollout: the
// reporting part of the time, as opposed to the cluster's pipeline. That
// lag is split in two: how long the EndpointSlices took to list the rolled
// out pods (endpointLags, the cluster's work), and how long after both the
// status said so (afterEndpoints, the client's own work).
//
// generationLags is, for each fleet, how long after the bench's cache first
// held its new generation its status named it (observedGeneration): what a
// script reading observedGeneration waits for, whatever the rollout does.
// deploymentLags is how long after the cache first held the fleet's
// workload asking for the new size (the client's update of it) the status
// named the new generation; 0 when the status came first.
type converged struct {
	times, lags, endpointLags, afterEndpoints, generationLags, deploymentLags []time.Duration
}

// firstSeen records now for each of names not recorded in at yet.
func firstSeen(at map[string]time.Duration, names map[string]bool, now time.Duration) {
	for name := range names {
		if _, ok := at[name]; !ok {
			at[name] = now
		}
	}
}

// waitConverged polls the bench's cache every 100 ms until n fleets are
// ready.
func (w *watcher) waitConverged(ctx context.Context, n int, size int32, t0 time.Time, withPods bool, timeout time.Duration) (converged, error) {
	doneAt := map[string]time.Duration{}
	rolledAt := map[string]time.Duration{}
	listedAt := map[string]time.Duration{}
	seenAt := map[string]time.Duration{}
	observedAt := map[string]time.Duration{}
	askedAt := map[string]time.Duration{}
	var last int
	lastLog := time.Now()
	err := pollFor(ctx, fmt.Sprintf("%d fleets in %s converged", n, w.ns), timeout, func(ctx context.Context) (bool, error) {
		list := &cachev1alpha1.MemcachedList{}
		if err := w.cache.List(ctx, list, client.InNamespace(w.ns), client.UnsafeDisableDeepCopy); err != nil {
			return false, err
		}
		var (
			pods       map[string][]string
			unrestored map[string]bool
		)
		if withPods {
			var err error
			if pods, unrestored, err = w.podState(ctx); err != nil {
				return false, err
			}
		}
		now := time.Since(t0)
		rolled, err := w.rolledOut(ctx, size)
		if err != nil {
			return false, err
		}
		firstSeen(rolledAt, rolled, now)
		asked, err := w.workloadsAsking(ctx, size)
		if err != nil {
			return false, err
		}
		firstSeen(askedAt, asked, now)
		listed, err := w.endpointsListed(ctx, size)
		if err != nil {
			return false, err
		}
		for name := range listed {
			if _, ok := listedAt[name]; !ok && rolled[name] {
				listedAt[name] = now
			}
		}
		for i := range list.Items {
			mc := &list.Items[i]
			if ptr.Deref(mc.Spec.Size, 1) == size {
				if _, ok := seenAt[mc.Name]; !ok {
					seenAt[mc.Name] = now
				}
				if _, ok := observedAt[mc.Name]; !ok && mc.Status.ObservedGeneration == mc.Generation {
					observedAt[mc.Name] = now
				}
			}
			if _, ok := doneAt[mc.Name]; ok {
				continue
			}
			var p []string
			if withPods {
				p = pods[mc.Name]
				if p == nil {
					p = []string{}
				}
			}
			if fleetReady(mc, size, p) && !unrestored[mc.Name] {
				doneAt[mc.Name] = now
			}
		}
		if len(doneAt) != last && time.Since(lastLog) > 5*time.Second {
			logf("  %s: %d/%d fleets ready after %s", w.ns, len(doneAt), n, now.Round(time.Second))
			last, lastLog = len(doneAt), time.Now()
		}
		return len(doneAt) >= n, nil
	})
	var c converged
	for name, o := range observedAt {
		c.generationLags = append(c.generationLags, o-seenAt[name])
		if a, ok := askedAt[name]; ok {
			c.deploymentLags = append(c.deploymentLags, max(0, o-a))
		}
	}
	for name, d := range doneAt {
		c.times = append(c.times, d)
		r, ok := rolledAt[name]
		if !ok {
			continue
		}
		c.lags = append(c.lags, max(0, d-r))
		if l, ok := listedAt[name]; ok {
			c.endpointLags = append(c.endpointLags, max(0, l-r))
			c.afterEndpoints = append(c.afterEndpoints, max(0, d-max(l, r)))
		}
	}
	for _, s := range [][]time.Duration{c.times, c.lags, c.endpointLags, c.afterEndpoints, c.generationLags, c.deploymentLags} {
		slices.Sort(s)
	}
	return c, err
}

// statuses are the fleets' statuses as JSON, by name.
func (w *watcher) statuses(ctx context.Context) (map[string]string, error) {
	list := &cachev1alpha1.MemcachedList{}
	if err := w.cache.List(ctx, list, client.InNamespace(w.ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(list.Items))
	for i := range list.Items {
		data, err := json.Marshal(list.Items[i].Status)
		if err != nil {
			return nil, err
		}
		out[list.Items[i].Name] = string(data)
	}
	return out, nil
}

// statusChanges describes, for each fleet whose status differs, the
// conditions and counts before and after.
func statusChanges(before, after map[string]string) []string {
	var out []string
	for name, b := range before {
		if a, ok := after[name]; ok && a != b {
			out = append(out, fmt.Sprintf("%s: %s → %s", name, b, a))
		}
	}
	sort.Strings(out)
	return out
}
