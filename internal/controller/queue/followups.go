package queue

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Settle is how long updates of a fleet's Deployment and EndpointSlices
// are gathered before the fleet is looked at: a rollout updates them in
// bursts (a pod created, scheduled, ready), and a pass per update costs CPU
// for nothing. It is short because it is also how late a fleet's status
// reports a finished rollout; the writes of a rollout's progress are paced
// by the status writer instead. Creations and deletions are not delayed: a missing
// object is repaired at once, and a cold start checks every fleet without
// waiting.
const Settle = 250 * time.Millisecond

// FollowUpPriority ranks the passes that the operator's own objects ask for
// (their creation, which the pass that created them has seen, and the
// updates of a rollout under way) below the passes for a spec the user
// changed or a fleet that is new, which run at the queue's default priority
// 0, and above a held report of progress (handler.LowPriority). When many
// fleets wait, the passes that start rollouts then go first: a rollout runs
// in the cluster while the workers go on, whereas a pass that follows one
// only reports it, and the longer it waits the more of the rollout's
// updates it gathers into one pass. A deleted object is not a follow-up: it
// is repaired at the default priority; nor is the update that ends a
// rollout (FollowUp.Ends).
const FollowUpPriority = -1

// FollowUps ranks the requests h makes for creations and updates at
// FollowUpPriority, and delays those for updates by settle, so that the
// updates of a window cost one pass (the queue keeps one request per
// fleet). Deletions are neither delayed nor ranked down.
func FollowUps(h handler.EventHandler, settle time.Duration) handler.EventHandler {
	return FollowUp{EventHandler: h, Settle: settle}
}

// FollowUp is an event handler whose requests FollowUps ranks and delays.
type FollowUp struct {
	handler.EventHandler
	// Settle is how long the requests for updates are delayed.
	Settle time.Duration
	// Ends, when set, tells the update that ends what the follow-ups
	// follow (a rollout's last step). Its pass reports the result users
	// wait for, so it is ranked with the spec changes, not below them:
	// behind a thousand new fleets a finished rollout would wait for all
	// of them before its status said so.
	Ends func(old, updated client.Object) bool
}

// Create ranks a creation's requests as follow-ups, at once.
func (f FollowUp) Create(ctx context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	f.EventHandler.Create(ctx, e, ranked(q, FollowUpPriority, 0))
}

// Update ranks an update's requests as follow-ups, after Settle; one that
// Ends ranks at the default priority, still after Settle, which gathers
// the slices' update of the same pods.
func (f FollowUp) Update(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	priority := FollowUpPriority
	if f.Ends != nil && f.Ends(e.ObjectOld, e.ObjectNew) {
		priority = 0
	}
	f.EventHandler.Update(ctx, e, ranked(q, priority, f.Settle))
}

// ranked is q adding at priority after delay. A queue without priorities
// only gets the delay.
func ranked(q workqueue.TypedRateLimitingInterface[reconcile.Request], priority int, delay time.Duration) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return rankedQueue{PriorityQueue: pq, priority: priority, delay: delay}
	}
	if delay > 0 {
		return delayed{TypedRateLimitingInterface: q, delay: delay}
	}
	return q
}

// rankedQueue is still a priority queue, so controller-runtime's handlers
// keep asking for handler.LowPriority where they do (an object from the
// initial list, a resync); any other request gets the queue's priority.
type rankedQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	priority int
	delay    time.Duration
}

func (q rankedQueue) Add(r reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, r) }
func (q rankedQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, r)
}
func (q rankedQueue) AddRateLimited(r reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, r)
}

func (q rankedQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(q.priority)
	}
	o.After = max(o.After, q.delay)
	q.PriorityQueue.AddWithOpts(o, items...)
}

// delayed turns every Add into an AddAfter.
type delayed struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	delay time.Duration
}

func (q delayed) Add(r reconcile.Request) { q.AddAfter(r, q.delay) }
