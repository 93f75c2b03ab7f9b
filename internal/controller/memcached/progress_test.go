package memcached_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/memcached"
)

// TestProgressOnly walks a fleet through the observations of a rollout and
// asks, for each step, whether the status change may wait: only more pods
// ready of a fleet that is not Available yet may.
func TestProgressOnly(t *testing.T) {
	type view struct {
		gen                             int64
		replicas, updated, ready, avail int32
		nodes                           []string
		depObserved                     bool
	}
	status := func(v view) cachev1alpha1.MemcachedStatus {
		mc, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) })
		mc.Generation = v.gen
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
		d.Status = appsv1.DeploymentStatus{Replicas: v.replicas, UpdatedReplicas: v.updated, ReadyReplicas: v.ready, AvailableReplicas: v.avail}
		if v.depObserved {
			d.Status.ObservedGeneration = 2
		}
		memcached.ComputeStatus(mc, memcached.Observation{Spec: spec, Deployment: d, Nodes: v.nodes, NodesObserved: true})
		return mc.Status
	}
	created := view{gen: 1, replicas: 3}
	oneReady := view{gen: 1, replicas: 3, updated: 3, ready: 1, nodes: []string{"a"}, depObserved: true}
	twoReady := view{gen: 1, replicas: 3, updated: 3, ready: 2, nodes: []string{"a", "b"}, depObserved: true}
	allReady := view{gen: 1, replicas: 3, updated: 3, ready: 3, avail: 3, nodes: []string{"a", "b", "c"}, depObserved: true}
	tests := []struct {
		name          string
		before, after view
		want          bool
	}{
		{"the first pod ready while rolling out", created, oneReady, true},
		{"one more pod ready, not Available yet", oneReady, twoReady, true},
		{"a ready pod lost while rolling out", twoReady, view{gen: 1, replicas: 3, updated: 3, ready: 2, nodes: []string{"b", "c"}, depObserved: true}, false},
		{"fewer pods ready", twoReady, oneReady, false},
		{"the fleet becomes Available", twoReady, allReady, false},
		{"a pod of an Available fleet is lost", allReady, view{gen: 1, replicas: 3, updated: 3, ready: 2, avail: 2, nodes: []string{"a", "b"}, depObserved: true}, false},
		{"an Available fleet's nodes change", allReady, view{gen: 1, replicas: 3, updated: 3, ready: 3, avail: 3, nodes: []string{"a", "b", "c", "d"}, depObserved: true}, false},
		{"a new generation", oneReady, view{gen: 2, replicas: 3, updated: 3, ready: 2, nodes: []string{"a", "b"}, depObserved: true}, false},
		{"nothing changed", twoReady, twoReady, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, after := status(tt.before), status(tt.after)
			NewWithT(t).Expect(memcached.ProgressOnly(&before, &after)).To(Equal(tt.want))
		})
	}
}

// TestStatusChanges: the log line of a status write names each difference,
// and nothing when the statuses are equal.
func TestStatusChanges(t *testing.T) {
	g := NewWithT(t)
	t0, t1 := metav1.Unix(100, 0), metav1.Unix(200, 0)
	cond := func(typ string, s metav1.ConditionStatus, reason string, at metav1.Time, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, LastTransitionTime: at, Message: msg, ObservedGeneration: 1}
	}
	before := &cachev1alpha1.MemcachedStatus{ReadyReplicas: 1, Nodes: []string{"a"}, ObservedGeneration: 1, Conditions: []metav1.Condition{
		cond("Available", metav1.ConditionFalse, "ReplicasNotReady", t0, "1 of 3"),
		cond("Ready", metav1.ConditionFalse, "RollingOut", t0, "x"),
		cond("Progressing", metav1.ConditionTrue, "RollingOut", t0, "x"),
		cond("Degraded", metav1.ConditionFalse, "AsExpected", t0, ""),
	}}
	g.Expect(memcached.StatusChanges(before, before.DeepCopy())).To(BeEmpty())
	after := before.DeepCopy()
	after.ReadyReplicas, after.Nodes = 3, []string{"a", "b", "c"}
	after.Conditions = []metav1.Condition{
		cond("Available", metav1.ConditionTrue, "AllReplicasReady", t1, "3 of 3"),
		cond("Ready", metav1.ConditionFalse, "RollingOut", t1, "x"),
		cond("Progressing", metav1.ConditionTrue, "RollingOut", t0, "y"),
		cond("Stalled", metav1.ConditionFalse, "AsExpected", t1, ""),
	}
	g.Expect(memcached.StatusChanges(before, after)).To(Equal([]string{
		"Available: False/ReplicasNotReady -> True/AllReplicasReady",
		"Ready: time",
		"Progressing: message",
		"Stalled: none -> False/AsExpected",
		"Degraded: removed",
		"nodes",
		"readyReplicas",
	}))
}

// TestStartOnly follows a fleet from one generation to the next and asks
// whether the first report of the new one only says it was taken up and is
// rolling out well, so that it may wait while other fleets wait for a
// worker: yes for a new fleet, a resize and a new pod template under way;
// no for anything kstatus or an event would tell apart (a pod lost on the
// way, a rollout already over, a failure or its end), nor within one
// generation.
func TestStartOnly(t *testing.T) {
	type view struct {
		gen, depGen            int64
		size, ready, available int32
		invalid, failing       bool
	}
	// next computes the status of view over the status before, as a pass
	// would: the Deployment has observed its generation when depGen is 1.
	next := func(before cachev1alpha1.MemcachedStatus, v view) cachev1alpha1.MemcachedStatus {
		mc, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To(v.size) })
		mc.Generation, mc.Status = v.gen, *before.DeepCopy()
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(v.size)}}
		d.Status = appsv1.DeploymentStatus{Replicas: max(v.ready, v.size), UpdatedReplicas: v.ready, ReadyReplicas: v.ready, AvailableReplicas: v.available}
		if v.depGen == 1 {
			d.Status.ObservedGeneration, d.Status.UpdatedReplicas, d.Status.Replicas = 2, v.size, v.size
		}
		o := memcached.Observation{Spec: spec, Deployment: d, NodesObserved: true}
		if v.failing {
			o.Errors = []error{errors.New("the API server timed out")}
		}
		if v.invalid {
			o.Invalid = field.ErrorList{field.Invalid(field.NewPath("spec", "size"), v.size, "too big")}
			o.Deployment = nil
		}
		memcached.ComputeStatus(mc, o)
		return mc.Status
	}
	none := cachev1alpha1.MemcachedStatus{}
	running := next(none, view{gen: 1, depGen: 1, size: 3, ready: 3, available: 3})
	rejected := next(none, view{gen: 1, size: 3, invalid: true})
	failing := next(running, view{gen: 1, depGen: 1, size: 3, ready: 3, available: 3, failing: true})
	tests := []struct {
		name   string
		before cachev1alpha1.MemcachedStatus
		after  view
		want   bool
	}{
		{"a new fleet, its Deployment just created", none, view{gen: 1, size: 3}, true},
		{"a resize, scaling up", running, view{gen: 2, size: 5, ready: 3, available: 3}, true},
		{"a new pod template, old pods serving", running, view{gen: 2, size: 3, ready: 3, available: 3}, true},
		{"a pod lost on the way", running, view{gen: 2, size: 5, ready: 2, available: 2}, false},
		{"rolled out by the first look", running, view{gen: 2, depGen: 1, size: 3, ready: 3, available: 3}, false},
		{"a new generation that breaks a rule", running, view{gen: 2, size: 3, invalid: true}, false},
		{"the fix of a spec that broke one", rejected, view{gen: 2, size: 3}, false},
		{"a new generation of a fleet that still fails", failing, view{gen: 2, size: 3, ready: 3, available: 3, failing: true}, false},
		{"progress within a generation", next(none, view{gen: 1, size: 3}), view{gen: 1, depGen: 1, size: 3, ready: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := next(tt.before, tt.after)
			NewWithT(t).Expect(memcached.StartOnly(&tt.before, &after)).To(Equal(tt.want))
		})
	}
}
