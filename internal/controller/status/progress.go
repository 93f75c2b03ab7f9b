package status

import (
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// ProgressOnly reports whether after differs from before only by a rollout's
// progress while the fleet is not yet Available: more pods ready, more ready
// pods listed, new messages, and no condition changing status or reason.
// Such a change is worth a write only now and then (the status writer's
// progress interval); a transition, a lost pod or anything else is written at
// once, and so is every change of a fleet that is Available.
func ProgressOnly(before, after *cachev1alpha1.MemcachedStatus) bool {
	if c := meta.FindStatusCondition(after.Conditions, cachev1alpha1.ConditionAvailable); c == nil || c.Status != metav1.ConditionFalse {
		return false
	}
	if len(before.Conditions) != len(after.Conditions) {
		return false
	}
	for _, a := range after.Conditions {
		b := meta.FindStatusCondition(before.Conditions, a.Type)
		if b == nil || b.Status != a.Status || b.Reason != a.Reason || b.ObservedGeneration != a.ObservedGeneration {
			return false
		}
	}
	for _, n := range before.Nodes {
		if !slices.Contains(after.Nodes, n) {
			return false
		}
	}
	return after.ReadyReplicas >= before.ReadyReplicas &&
		before.ObservedGeneration == after.ObservedGeneration &&
		before.Selector == after.Selector &&
		apiequality.Semantic.DeepEqual(before.Effective, after.Effective)
}

// Changes names what differs between two statuses, for the log line
// of a status write: a condition by type with its status and reason before
// and after ("Ready: False/RollingOut -> True/AllReplicasReady"), or with
// the first other part that moved ("Ready: generation", "Ready: time",
// "Ready: message"), one appearing or removed, and the other fields by name.
func Changes(before, after *cachev1alpha1.MemcachedStatus) []string {
	var out []string
	for _, a := range after.Conditions {
		b := meta.FindStatusCondition(before.Conditions, a.Type)
		switch {
		case b == nil:
			out = append(out, a.Type+": none -> "+string(a.Status)+"/"+a.Reason)
		case b.Status != a.Status || b.Reason != a.Reason:
			out = append(out, a.Type+": "+string(b.Status)+"/"+b.Reason+" -> "+string(a.Status)+"/"+a.Reason)
		case b.ObservedGeneration != a.ObservedGeneration:
			out = append(out, a.Type+": generation")
		case !b.LastTransitionTime.Equal(&a.LastTransitionTime):
			out = append(out, a.Type+": time")
		case b.Message != a.Message:
			out = append(out, a.Type+": message")
		}
	}
	for _, b := range before.Conditions {
		if meta.FindStatusCondition(after.Conditions, b.Type) == nil {
			out = append(out, b.Type+": removed")
		}
	}
	fields := []struct {
		name string
		same bool
	}{
		{"nodes", slices.Equal(before.Nodes, after.Nodes)},
		{"replicas", before.Replicas == after.Replicas},
		{"readyReplicas", before.ReadyReplicas == after.ReadyReplicas},
		{"selector", before.Selector == after.Selector},
		{"effective", apiequality.Semantic.DeepEqual(before.Effective, after.Effective)},
		{"observedGeneration", before.ObservedGeneration == after.ObservedGeneration},
	}
	for _, f := range fields {
		if !f.same {
			out = append(out, f.name)
		}
	}
	return out
}
