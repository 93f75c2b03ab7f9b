package status

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/fleettest"
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
		mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) })
		mc.Generation = v.gen
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
		d.Status = appsv1.DeploymentStatus{Replicas: v.replicas, UpdatedReplicas: v.updated, ReadyReplicas: v.ready, AvailableReplicas: v.avail}
		if v.depObserved {
			d.Status.ObservedGeneration = 2
		}
		Compute(mc, Observation{Spec: spec, Deployment: d, Nodes: v.nodes, NodesObserved: true})
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
			NewWithT(t).Expect(ProgressOnly(&before, &after)).To(Equal(tt.want))
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
	g.Expect(Changes(before, before.DeepCopy())).To(BeEmpty())
	after := before.DeepCopy()
	after.ReadyReplicas, after.Nodes = 3, []string{"a", "b", "c"}
	after.Conditions = []metav1.Condition{
		cond("Available", metav1.ConditionTrue, "AllReplicasReady", t1, "3 of 3"),
		cond("Ready", metav1.ConditionFalse, "RollingOut", t1, "x"),
		cond("Progressing", metav1.ConditionTrue, "RollingOut", t0, "y"),
		cond("Stalled", metav1.ConditionFalse, "AsExpected", t1, ""),
	}
	g.Expect(Changes(before, after)).To(Equal([]string{
		"Available: False/ReplicasNotReady -> True/AllReplicasReady",
		"Ready: time",
		"Progressing: message",
		"Stalled: none -> False/AsExpected",
		"Degraded: removed",
		"nodes",
		"readyReplicas",
	}))
}
