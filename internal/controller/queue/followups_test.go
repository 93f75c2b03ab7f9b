package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// recordingQueue notes what a handler asks of the work queue.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added, after []reconcile.Request
	delays       []time.Duration
}

func (q *recordingQueue) Add(r reconcile.Request) { q.added = append(q.added, r) }
func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.after, q.delays = append(q.after, r), append(q.delays, d)
}

// TestFollowUpsWithoutPriorities: on a queue without priorities,
// creations and deletions are added at once and updates after Settle.
func TestFollowUpsWithoutPriorities(t *testing.T) {
	g := NewWithT(t)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cache"}}
	inner := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{req} })
	h := FollowUps(inner, Settle)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache"}}
	q := &recordingQueue{}
	h.Create(context.Background(), event.TypedCreateEvent[client.Object]{Object: dep}, q)
	h.Delete(context.Background(), event.TypedDeleteEvent[client.Object]{Object: dep}, q)
	g.Expect(q.added).To(HaveLen(2), "creations and deletions are not delayed")
	g.Expect(q.after).To(BeEmpty())
	h.Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: dep, ObjectNew: dep}, q)
	g.Expect(q.added).To(HaveLen(2))
	g.Expect(q.after).To(ConsistOf(req))
	g.Expect(q.delays).To(ConsistOf(Settle))
}

// optsQueue records what a handler asks of a priority queue.
type optsQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	adds []string
}

func (q *optsQueue) Add(reconcile.Request) { q.adds = append(q.adds, "priority 0 after 0s") }
func (q *optsQueue) AddWithOpts(o priorityqueue.AddOpts, _ ...reconcile.Request) {
	q.adds = append(q.adds, fmt.Sprintf("priority %d after %s", ptr.Deref(o.Priority, 0), o.After))
}

// TestFollowUpsRankBelowSpecChanges: on the priority queue, the operator's
// own objects' creations and updates (a rollout's) are FollowUpPriority,
// below a spec change's default 0, and updates wait Settle; a
// deletion is repaired at 0; the initial list and resyncs keep
// controller-runtime's LowPriority, below both. For the handlers of owned
// objects and of mapped ones alike.
func TestFollowUpsRankBelowSpecChanges(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(cachev1alpha1.GroupVersion.WithKind("Memcached"), meta.RESTScopeNamespace)
	owner := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", UID: "uid-1"}}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cache"}}
	for name, inner := range map[string]handler.EventHandler{
		"owned":  handler.EnqueueRequestForOwner(scheme, mapper, &cachev1alpha1.Memcached{}, handler.OnlyControllerOwner()),
		"mapped": handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{req} }),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			h := FollowUps(inner, Settle)
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", ResourceVersion: "1",
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, cachev1alpha1.GroupVersion.WithKind("Memcached"))}}}
			moved := dep.DeepCopy()
			moved.ResourceVersion = "2"
			ctx := context.Background()
			q := &optsQueue{}
			h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: dep}, q)
			h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: dep, IsInInitialList: true}, q)
			h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep, ObjectNew: moved}, q)
			h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep, ObjectNew: dep}, q)
			h.Delete(ctx, event.TypedDeleteEvent[client.Object]{Object: dep}, q)
			g.Expect(q.adds).To(Equal([]string{
				fmt.Sprintf("priority %d after 0s", FollowUpPriority),
				fmt.Sprintf("priority %d after 0s", handler.LowPriority),
				fmt.Sprintf("priority %d after %s", FollowUpPriority, Settle),
				fmt.Sprintf("priority %d after %s", handler.LowPriority, Settle),
				"priority 0 after 0s",
			}))
		})
	}
	g := NewWithT(t)
	g.Expect(FollowUpPriority).To(BeNumerically("<", 0), "below a spec change")
	g.Expect(FollowUpPriority).To(BeNumerically(">", handler.LowPriority), "above a held report of progress")
}

// TestFollowUpsRunAfterSpecChanges: on controller-runtime's priority queue
// itself, a fleet whose spec changed is handed to a worker before one whose
// rollout moved, even when the rollout's update came first.
func TestFollowUpsRunAfterSpecChanges(t *testing.T) {
	g := NewWithT(t)
	q := priorityqueue.New[reconcile.Request]("followups")
	defer q.ShutDown()
	rolling := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "rolling"}}
	edited := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "edited"}}
	h := FollowUps(handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{rolling} }), 0)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rolling", ResourceVersion: "1"}}
	moved := dep.DeepCopy()
	moved.ResourceVersion = "2"
	h.Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: dep, ObjectNew: moved}, q)
	forObject := handler.EnqueueRequestForObject{}
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "edited", ResourceVersion: "1"}}
	newer := mc.DeepCopy()
	newer.ResourceVersion, newer.Generation = "2", 2
	forObject.Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: mc, ObjectNew: newer}, q)
	g.Eventually(q.Len).Should(Equal(2))
	first, _ := q.Get()
	g.Expect(first).To(Equal(edited))
	second, _ := q.Get()
	g.Expect(second).To(Equal(rolling))
}

// TestRolloutEndRanksWithSpecChanges: an update that Ends is asked at the
// default priority after Settle, while the other updates of the same
// handler stay follow-ups and a resync keeps LowPriority; on the priority
// queue itself it overtakes the follow-ups queued before it and lifts a
// fleet's queued follow-up to its rank, behind the spec change queued
// before it.
func TestRolloutEndRanksWithSpecChanges(t *testing.T) {
	g := NewWithT(t)
	ended := func(_, updated client.Object) bool { return updated.GetResourceVersion() == "ended" }
	dep := func(name, rv string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: o.GetName()}}}
	})
	h := FollowUp{EventHandler: byName, Settle: Settle, Ends: ended}
	ctx := context.Background()
	q := &optsQueue{}
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep("a", "1"), ObjectNew: dep("a", "2")}, q)
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep("a", "2"), ObjectNew: dep("a", "ended")}, q)
	h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep("a", "ended"), ObjectNew: dep("a", "ended")}, q)
	h.Create(ctx, event.TypedCreateEvent[client.Object]{Object: dep("a", "ended")}, q)
	g.Expect(q.adds).To(Equal([]string{
		fmt.Sprintf("priority %d after %s", FollowUpPriority, Settle),
		fmt.Sprintf("priority 0 after %s", Settle),
		fmt.Sprintf("priority %d after %s", handler.LowPriority, Settle),
		fmt.Sprintf("priority %d after 0s", FollowUpPriority),
	}), "an ended rollout's creation is the pass that created it seeing it, a follow-up")

	pq := priorityqueue.New[reconcile.Request]("rollout-end")
	defer pq.ShutDown()
	now := FollowUp{EventHandler: byName, Ends: ended}
	now.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep("progressing", "1"), ObjectNew: dep("progressing", "2")}, pq)
	now.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep("lifted", "1"), ObjectNew: dep("lifted", "2")}, pq)
	(&handler.EnqueueRequestForObject{}).Create(ctx, event.TypedCreateEvent[client.Object]{Object: &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}}}, pq)
	now.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep("finished", "2"), ObjectNew: dep("finished", "ended")}, pq)
	now.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: dep("lifted", "2"), ObjectNew: dep("lifted", "ended")}, pq)
	g.Eventually(pq.Len).Should(Equal(4))
	var order []string
	for range 4 {
		r, _ := pq.Get()
		order = append(order, r.Name)
		pq.Done(r)
	}
	g.Expect(order).To(Equal([]string{"new", "finished", "lifted", "progressing"}))
}
