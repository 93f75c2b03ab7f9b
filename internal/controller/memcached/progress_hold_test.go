package memcached

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// statusWriteCounter is a fake API holding one fleet that counts the status
// writes reaching it.
func statusWriteCounter(g Gomega) (*cachev1alpha1.Memcached, client.Client, *int) {
	scheme := runtime.NewScheme()
	g.Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", Generation: 1}}
	writes := 0
	c := withFleetIndexes(fake.NewClientBuilder()).WithScheme(scheme).WithObjects(mc).WithStatusSubresource(mc).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	return mc, c, &writes
}

// statusPasses returns pass, which writes want through r.patchStatus over
// the status last written (stored) and reports the hold.
func statusPasses(t *testing.T, g Gomega, r *Reconciler, c client.Client, mc *cachev1alpha1.Memcached) (func(cachev1alpha1.MemcachedStatus) time.Duration, *cachev1alpha1.MemcachedStatus) {
	stored := &cachev1alpha1.MemcachedStatus{}
	return func(want cachev1alpha1.MemcachedStatus) time.Duration {
		t.Helper()
		cur := &cachev1alpha1.Memcached{}
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mc), cur)).To(Succeed())
		cur.Status = *stored
		s := &scope{original: cur.DeepCopy(), memcached: cur}
		s.memcached.Status = want
		g.Expect(r.patchStatus(context.Background(), s)).To(Succeed())
		if s.heldFor == 0 {
			*stored = want
		}
		return s.heldFor
	}, stored
}

// TestProgressHold drives patchStatus through a rollout on a fake clock and
// counts the status writes that reach the API.
func TestProgressHold(t *testing.T) {
	g := NewWithT(t)
	mc, c, writes := statusWriteCounter(g)
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := start
	r := &Reconciler{Client: c, ProgressInterval: 10 * time.Second, now: func() time.Time { return now }}

	cond := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: cachev1alpha1.ConditionAvailable, Status: status, Reason: reason, Message: "m",
			ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(start)}}
	}
	rollingOut := func(ready int32, nodes ...string) cachev1alpha1.MemcachedStatus {
		return cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: ready, Nodes: nodes,
			Conditions: cond(metav1.ConditionFalse, cachev1alpha1.ReasonReplicasNotReady)}
	}
	pass, stored := statusPasses(t, g, r, c, mc)

	g.Expect(pass(rollingOut(0))).To(BeZero(), "the first status is written at once")
	g.Expect(*writes).To(Equal(1))
	now = start.Add(2 * time.Second)
	g.Expect(pass(rollingOut(1, "a"))).To(Equal(8*time.Second), "progress waits for the rest of the interval")
	now = start.Add(5 * time.Second)
	g.Expect(pass(rollingOut(2, "a", "b"))).To(Equal(5 * time.Second))
	g.Expect(*writes).To(Equal(1))
	now = start.Add(10 * time.Second)
	g.Expect(pass(rollingOut(2, "a", "b"))).To(BeZero(), "once due, the progress is written")
	g.Expect(*writes).To(Equal(2))
	now = start.Add(11 * time.Second)
	g.Expect(pass(rollingOut(1, "b"))).To(BeZero(), "a lost pod is written at once")
	g.Expect(*writes).To(Equal(3))
	now = start.Add(12 * time.Second)
	available := cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: 3, Nodes: []string{"a", "b", "c"},
		Conditions: cond(metav1.ConditionTrue, cachev1alpha1.ReasonAllReplicasReady)}
	g.Expect(pass(available)).To(BeZero(), "a transition is written at once")
	g.Expect(*writes).To(Equal(4))
	g.Expect(pass(available)).To(BeZero())
	g.Expect(*writes).To(Equal(4), "a pass that changes nothing writes nothing")

	r.ProgressInterval = 0
	now = start.Add(13 * time.Second)
	*stored = rollingOut(1, "a")
	g.Expect(pass(rollingOut(2, "a", "b"))).To(BeZero(), "with no interval every change is written")
	g.Expect(*writes).To(Equal(5))
}

// queueClock is a Reconciler with a 10 s progress interval over a fake
// clock and a fake queue: set *now and *waiting to move them.
type queueClock struct {
	r       *Reconciler
	start   time.Time
	now     *time.Time
	waiting *int
}

func newQueueClock(c client.Client, waiting int) queueClock {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := start
	qc := queueClock{start: start, now: &now, waiting: &waiting}
	qc.r = &Reconciler{Client: c, ProgressInterval: 10 * time.Second, now: func() time.Time { return *qc.now }}
	queued := func() int { return *qc.waiting }
	qc.r.backlog.Store(&queued)
	return qc
}

// TestProgressWaitsForABacklog: a report of progress that is due is held
// while other fleets wait for a worker, for a whole interval each time, and
// written once none waits; a transition is written at once whatever the
// queue. The metric tells the two causes apart.
func TestProgressWaitsForABacklog(t *testing.T) {
	g := NewWithT(t)
	mc, c, writes := statusWriteCounter(g)
	qc := newQueueClock(c, 0)
	r, start, now, waiting := qc.r, qc.start, qc.now, qc.waiting
	progress0, change0 := testutil.ToFloat64(statusWrites.WithLabelValues(statusProgress)), testutil.ToFloat64(statusWrites.WithLabelValues(statusChange))

	status := func(available metav1.ConditionStatus, ready int32) cachev1alpha1.MemcachedStatus {
		return cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: ready,
			Conditions: []metav1.Condition{{Type: cachev1alpha1.ConditionAvailable, Status: available, Reason: "r", Message: "m",
				ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(start)}}}
	}
	pass, _ := statusPasses(t, g, r, c, mc)

	g.Expect(pass(status(metav1.ConditionFalse, 3))).To(BeZero())
	*waiting = 1
	*now = start.Add(30 * time.Second)
	g.Expect(pass(status(metav1.ConditionFalse, 4))).To(Equal(10*time.Second), "due, but a fleet waits for a worker: held a whole interval")
	*now = start.Add(40 * time.Second)
	g.Expect(pass(status(metav1.ConditionFalse, 4))).To(Equal(10 * time.Second))
	g.Expect(*writes).To(Equal(1))
	*waiting = 0
	g.Expect(pass(status(metav1.ConditionFalse, 4))).To(BeZero(), "no one waits: written")
	g.Expect(*writes).To(Equal(2))
	*waiting = 500
	*now = start.Add(41 * time.Second)
	g.Expect(pass(status(metav1.ConditionTrue, 5))).To(BeZero(), "a transition is written whatever the queue")
	g.Expect(*writes).To(Equal(3))
	g.Expect(testutil.ToFloat64(statusWrites.WithLabelValues(statusProgress)) - progress0).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(statusWrites.WithLabelValues(statusChange)) - change0).To(Equal(2.0))
}

// TestStaleCacheSendsNoSecondWrite: a pass that reads the fleet from a cache
// that has not yet seen this process's last status write computes the same
// status again; it must not send it twice. A different status, or a fleet
// the cache has caught up on, is written as usual.
func TestStaleCacheSendsNoSecondWrite(t *testing.T) {
	g := NewWithT(t)
	mc, c, writes := statusWriteCounter(g)
	r := &Reconciler{Client: c}
	stale := &cachev1alpha1.Memcached{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mc), stale)).To(Succeed())
	status := func(ready int32) cachev1alpha1.MemcachedStatus {
		return cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: ready}
	}
	pass := func(read *cachev1alpha1.Memcached, want cachev1alpha1.MemcachedStatus) {
		t.Helper()
		s := &scope{original: read.DeepCopy(), memcached: read.DeepCopy()}
		s.memcached.Status = want
		g.Expect(r.patchStatus(context.Background(), s)).To(Succeed())
	}
	pass(stale, status(3))
	g.Expect(*writes).To(Equal(1))
	pass(stale, status(3))
	g.Expect(*writes).To(Equal(1), "the same status over the same stale object is not sent again")
	pass(stale, status(2))
	g.Expect(*writes).To(Equal(2), "a different status is written")
	fresh := &cachev1alpha1.Memcached{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mc), fresh)).To(Succeed())
	fresh.Status = status(3)
	pass(fresh, status(2))
	g.Expect(*writes).To(Equal(3), "over a newer object, a status that differs from it is written")
}

// TestBacklogIsTheQueuesLength: the queue the controller gets is the one
// the backlog counts: requests waiting for a worker, not those taken.
func TestBacklogIsTheQueuesLength(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{}
	q := r.newQueue(logr.Discard())("memcached", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	backlog := *r.backlog.Load()
	g.Expect(backlog()).To(BeZero())
	for _, name := range []string{"a", "b", "a"} {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}})
	}
	g.Expect(backlog()).To(Equal(2), "one per fleet")
	item, _ := q.Get()
	g.Expect(backlog()).To(Equal(1), "a fleet taken by a worker no longer waits")
	q.Done(item)
}

// TestStartReportWaitsForABacklog: the report that a fleet took up a new
// generation and is rolling out (StartOnly) is held while other fleets
// wait for a worker, one interval at most from its first hold; without a
// backlog, or once the interval is over, or when the next status is
// anything else (a failure, the end of the rollout), it is written at once.
func TestStartReportWaitsForABacklog(t *testing.T) {
	g := NewWithT(t)
	mc, c, writes := statusWriteCounter(g)
	qc := newQueueClock(c, 1)
	r, start, now, waiting := qc.r, qc.start, qc.now, qc.waiting
	status := func(gen int64, reconciling, degraded, available metav1.ConditionStatus) cachev1alpha1.MemcachedStatus {
		cond := func(t string, s metav1.ConditionStatus) metav1.Condition {
			return metav1.Condition{Type: t, Status: s, Reason: "r", Message: "m", ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(start)}
		}
		return cachev1alpha1.MemcachedStatus{ObservedGeneration: gen, Conditions: []metav1.Condition{
			cond(cachev1alpha1.ConditionReconciling, reconciling), cond(cachev1alpha1.ConditionDegraded, degraded),
			cond(cachev1alpha1.ConditionAvailable, available)}}
	}
	rolling := func(gen int64) cachev1alpha1.MemcachedStatus {
		return status(gen, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse)
	}
	pass, _ := statusPasses(t, g, r, c, mc)

	g.Expect(pass(rolling(1))).To(Equal(10*time.Second), "a new fleet's first report waits while others wait")
	*now = start.Add(4 * time.Second)
	g.Expect(pass(rolling(1))).To(Equal(6*time.Second), "for one interval from its first hold, not from each pass")
	g.Expect(*writes).To(BeZero())
	*now = start.Add(10 * time.Second)
	g.Expect(pass(rolling(1))).To(BeZero(), "the interval is over: written, backlog or not")
	g.Expect(*writes).To(Equal(1))

	*waiting = 0
	g.Expect(pass(rolling(2))).To(BeZero(), "no one waits: written at once")
	g.Expect(*writes).To(Equal(2))

	*waiting = 1
	g.Expect(pass(rolling(3))).To(Equal(10 * time.Second))
	g.Expect(pass(status(3, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionFalse))).To(BeZero(), "a failure is written at once")
	g.Expect(*writes).To(Equal(3))

	g.Expect(pass(rolling(4))).To(BeZero(), "so is the end of a failure")
	g.Expect(*writes).To(Equal(4))

	*now = start.Add(20 * time.Second)
	g.Expect(pass(rolling(5))).To(Equal(10 * time.Second))
	*now = start.Add(25 * time.Second)
	g.Expect(pass(status(5, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue))).To(BeZero(), "the end of the rollout is written at once")
	g.Expect(*writes).To(Equal(5))
	_, held := r.startHeld.Load(client.ObjectKeyFromObject(mc))
	g.Expect(held).To(BeFalse(), "a written report is no longer held")
	// A new pod template: Available while the old pods serve.
	template := status(6, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionTrue)
	g.Expect(pass(template)).To(Equal(10*time.Second), "the next generation's hold starts afresh")
	*now = start.Add(30 * time.Second)
	template = status(7, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionTrue)
	g.Expect(pass(template)).To(Equal(10*time.Second), "and so does that of a generation given while one was held")

	r.ProgressInterval = 0
	g.Expect(pass(template)).To(BeZero(), "with no interval every change is written")
	g.Expect(*writes).To(Equal(6))
}
