package queue

import (
	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// New makes controller-runtime's own default queue (a priority queue) and
// hands its length to made, so the status writer can tell whether fleets
// wait for a worker. The controller calls it when it starts, before its
// workers.
func New(log logr.Logger, made func(length func() int)) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
			o.Log = log.WithValues("controller", name)
			o.RateLimiter = limiter
		})
		made(q.Len)
		return q
	}
}
