package memcached

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// statusPasses returns pass, which writes want through r's status writer
// over the status last written (stored) and reports the hold.
func statusPasses(t *testing.T, g Gomega, r *Reconciler, c client.Client, mc *cachev1alpha1.Memcached) (func(cachev1alpha1.MemcachedStatus) time.Duration, *cachev1alpha1.MemcachedStatus) {
	stored := &cachev1alpha1.MemcachedStatus{}
	return func(want cachev1alpha1.MemcachedStatus) time.Duration {
		t.Helper()
		cur := &cachev1alpha1.Memcached{}
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mc), cur)).To(Succeed())
		cur.Status = *stored
		updated := cur.DeepCopy()
		updated.Status = want
		held, err := r.writer().write(context.Background(), c, cur, updated)
		g.Expect(err).NotTo(HaveOccurred())
		if held == 0 {
			*stored = want
		}
		return held
	}, stored
}

// TestProgressHold drives the status writer through a rollout on a fake clock and
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

	r.writer().interval = 0
	now = start.Add(13 * time.Second)
	*stored = rollingOut(1, "a")
	g.Expect(pass(rollingOut(2, "a", "b"))).To(BeZero(), "with no interval every change is written")
	g.Expect(*writes).To(Equal(5))
}

// TestProgressBudgetIsShared: the progress reports of all fleets together
// stay within the writer's rate; a report over it waits another interval,
// and a transition or a new generation is never held for it.
func TestProgressBudgetIsShared(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st := func(available metav1.ConditionStatus, reason string, ready int32) *cachev1alpha1.MemcachedStatus {
		return &cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: ready,
			Conditions: []metav1.Condition{{Type: cachev1alpha1.ConditionAvailable, Status: available, Reason: reason, Message: "m",
				ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(at)}}}
	}
	rolling := func(ready int32) *cachev1alpha1.MemcachedStatus {
		return st(metav1.ConditionFalse, cachev1alpha1.ReasonScalingUp, ready)
	}
	g := NewWithT(t)
	w := &statusWriter{interval: 10 * time.Second, budget: progressBudget(2)}
	fleet := func(i int) *cachev1alpha1.Memcached {
		name := fmt.Sprintf("cache-%d", i)
		w.last.Store(types.NamespacedName{Namespace: "ns", Name: name}, &statusWrite{at: at.Add(-time.Minute), over: "6", status: statusDigest(rolling(1))})
		return &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "7"}, Status: *rolling(1)}
	}
	var sent, held int
	for i := range 10 {
		switch v := w.decide(fleet(i), rolling(2), at); v {
		case verdict{cause: statusProgress}:
			sent++
		case verdict{wait: 10 * time.Second}:
			held++
		default:
			t.Fatalf("fleet %d: %+v", i, v)
		}
	}
	g.Expect(sent).To(Equal(2), "a second's worth of progress at once")
	g.Expect(held).To(Equal(8))
	g.Expect(w.decide(fleet(10), st(metav1.ConditionTrue, cachev1alpha1.ReasonAllReplicasReady, 3), at)).To(Equal(verdict{cause: statusChange}),
		"a transition is not held for the budget")
	newGeneration := rolling(2)
	newGeneration.ObservedGeneration = 2
	g.Expect(w.decide(fleet(11), newGeneration, at)).To(Equal(verdict{cause: statusChange}), "nor is a new generation")
	g.Expect(w.decide(fleet(12), rolling(2), at.Add(500*time.Millisecond))).To(Equal(verdict{cause: statusProgress}),
		"the budget refills at its rate")
	g.Expect(w.decide(fleet(13), rolling(2), at.Add(500*time.Millisecond))).To(Equal(verdict{wait: 10 * time.Second}))
	g.Expect(progressBudget(0)).To(BeNil(), "0 does not limit progress reports")
}

// TestStaleCacheSendsNoSecondWrite: a pass that reads the fleet from a cache
// that has not yet seen this process's last status write computes the same
// status again; it must not send it twice. A different status over that
// object waits for the cache; over an object the cache has caught up on, it
// is written as usual.
func TestStaleCacheSendsNoSecondWrite(t *testing.T) {
	g := NewWithT(t)
	mc, c, writes := statusWriteCounter(g)
	r := &Reconciler{Client: c}
	stale := &cachev1alpha1.Memcached{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mc), stale)).To(Succeed())
	status := func(ready int32) cachev1alpha1.MemcachedStatus {
		return cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: ready}
	}
	pass := func(read *cachev1alpha1.Memcached, want cachev1alpha1.MemcachedStatus) time.Duration {
		t.Helper()
		updated := read.DeepCopy()
		updated.Status = want
		held, err := r.writer().write(context.Background(), c, read.DeepCopy(), updated)
		g.Expect(err).NotTo(HaveOccurred())
		return held
	}
	pass(stale, status(3))
	g.Expect(*writes).To(Equal(1))
	pass(stale, status(3))
	g.Expect(*writes).To(Equal(1), "the same status over the same stale object is not sent again")
	held := pass(stale, status(2))
	g.Expect(*writes).To(Equal(1), "a different status over the same stale object waits for the cache")
	g.Expect(held).To(Equal(staleRecheck))
	fresh := &cachev1alpha1.Memcached{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mc), fresh)).To(Succeed())
	fresh.Status = status(3)
	pass(fresh, status(2))
	g.Expect(*writes).To(Equal(2), "over a newer object, a status that differs from it is written")
}

// TestStatusWriterRules: each rule of the status writer, on its own.
func TestStatusWriterRules(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	st := func(available metav1.ConditionStatus, reason string, ready int32, nodes ...string) cachev1alpha1.MemcachedStatus {
		return cachev1alpha1.MemcachedStatus{ObservedGeneration: 1, ReadyReplicas: ready, Nodes: nodes,
			Conditions: []metav1.Condition{{Type: cachev1alpha1.ConditionAvailable, Status: available, Reason: reason, Message: "m",
				ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(at)}}}
	}
	rolling := func(ready int32, nodes ...string) cachev1alpha1.MemcachedStatus {
		return st(metav1.ConditionFalse, cachev1alpha1.ReasonReplicasNotReady, ready, nodes...)
	}
	newGeneration := rolling(1, "a")
	newGeneration.ObservedGeneration = 2
	for _, tc := range []struct {
		name     string
		interval time.Duration
		// last is this process's last write: how long ago, over which
		// resourceVersion, and what; nil when there was none.
		lastAgo  time.Duration
		lastOver string
		last     *cachev1alpha1.MemcachedStatus
		read     cachev1alpha1.MemcachedStatus
		computed cachev1alpha1.MemcachedStatus
		want     verdict
	}{
		{name: "unchanged", interval: 10 * time.Second, read: rolling(1, "a"), computed: rolling(1, "a"), want: verdict{}},
		{name: "the first status of a fleet", interval: 10 * time.Second, computed: rolling(0), want: verdict{cause: statusChange}},
		{name: "the same status again over the object of the last write", lastAgo: time.Second, lastOver: "7", last: ptr.To(rolling(1, "a")),
			read: rolling(0), computed: rolling(1, "a"), want: verdict{}},
		{name: "another status over the object of the last write", interval: 10 * time.Second, lastAgo: time.Second, lastOver: "7", last: ptr.To(rolling(1, "a")),
			read: rolling(0), computed: rolling(2, "a", "b"), want: verdict{wait: staleRecheck}},
		{name: "the same status over a newer object", lastAgo: time.Second, lastOver: "6", last: ptr.To(rolling(1, "a")),
			read: rolling(0), computed: rolling(1, "a"), want: verdict{cause: statusChange}},
		{name: "progress within the interval", interval: 10 * time.Second, lastAgo: 3 * time.Second, lastOver: "6", last: ptr.To(rolling(1, "a")),
			read: rolling(1, "a"), computed: rolling(2, "a", "b"), want: verdict{wait: 7 * time.Second}},
		{name: "progress that is due", interval: 10 * time.Second, lastAgo: 10 * time.Second, lastOver: "6", last: ptr.To(rolling(1, "a")),
			read: rolling(1, "a"), computed: rolling(2, "a", "b"), want: verdict{cause: statusProgress}},
		{name: "progress without an interval", lastAgo: time.Second, lastOver: "6", last: ptr.To(rolling(1, "a")),
			read: rolling(1, "a"), computed: rolling(2, "a", "b"), want: verdict{cause: statusChange}},
		{name: "a lost pod", interval: 10 * time.Second, lastAgo: time.Second, lastOver: "6", last: ptr.To(rolling(2, "a", "b")),
			read: rolling(2, "a", "b"), computed: rolling(1, "b"), want: verdict{cause: statusChange}},
		{name: "a transition", interval: 10 * time.Second, lastAgo: time.Second, lastOver: "6", last: ptr.To(rolling(2, "a", "b")),
			read: rolling(2, "a", "b"), computed: st(metav1.ConditionTrue, cachev1alpha1.ReasonAllReplicasReady, 3, "a", "b", "c"), want: verdict{cause: statusChange}},
		{name: "a new generation", interval: 10 * time.Second, lastAgo: time.Second, lastOver: "6", last: ptr.To(rolling(1, "a")),
			read: rolling(1, "a"), computed: newGeneration, want: verdict{cause: statusChange}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &statusWriter{interval: tc.interval}
			read := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", ResourceVersion: "7"}, Status: tc.read}
			if tc.last != nil {
				w.last.Store(types.NamespacedName{Namespace: "ns", Name: "cache"}, &statusWrite{at: at.Add(-tc.lastAgo), over: tc.lastOver, status: statusDigest(tc.last)})
			}
			g.Expect(w.decide(read, &tc.computed, at)).To(Equal(tc.want))
		})
	}
}
