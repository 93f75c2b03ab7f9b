package memcached

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// statusSettle is how long updates of a fleet's Deployment and
// EndpointSlices are gathered before the fleet is looked at: a rollout
// updates them in bursts (a pod created, scheduled, ready), and a pass per
// update costs CPU for nothing. It is short because it is also how late a
// fleet's status reports a finished rollout, and writes no longer depend on
// it: what a rollout's progress would write is held by the Reconciler's
// ProgressInterval (the bench measured 1 s: 1.1 s of status lag behind the
// rollout at N=100). Creations and deletions are not delayed: a missing
// object is repaired at once, and a cold start checks every fleet without
// waiting.
const statusSettle = 250 * time.Millisecond

// coalesceUpdates delays the requests h makes for update events by d; the
// work queue keeps one pending request per fleet, so the updates of a
// window cost one pass.
func coalesceUpdates(h handler.EventHandler, d time.Duration) handler.EventHandler {
	return coalescing{EventHandler: h, delay: d}
}

type coalescing struct {
	handler.EventHandler
	delay time.Duration
}

func (c coalescing) Update(ctx context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.EventHandler.Update(ctx, e, delayed{TypedRateLimitingInterface: q, delay: c.delay})
}

// delayed turns every Add into an AddAfter. It deliberately hides the
// priority queue's AddWithOpts, so handlers fall back to Add.
type delayed struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	delay time.Duration
}

func (q delayed) Add(r reconcile.Request) { q.AddAfter(r, q.delay) }
