package memcached

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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

func TestCoalesceUpdatesDelaysUpdatesOnly(t *testing.T) {
	g := NewWithT(t)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "cache"}}
	inner := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{req} })
	h := coalesceUpdates(inner, statusSettle)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache"}}
	q := &recordingQueue{}
	h.Create(context.Background(), event.TypedCreateEvent[client.Object]{Object: dep}, q)
	h.Delete(context.Background(), event.TypedDeleteEvent[client.Object]{Object: dep}, q)
	g.Expect(q.added).To(HaveLen(2), "creations and deletions are not delayed")
	g.Expect(q.after).To(BeEmpty())
	h.Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: dep, ObjectNew: dep}, q)
	g.Expect(q.added).To(HaveLen(2))
	g.Expect(q.after).To(ConsistOf(req))
	g.Expect(q.delays).To(ConsistOf(statusSettle))
}
