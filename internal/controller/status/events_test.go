package status

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// TestCreatedEventOnlyWithTheWorkloadBuiltAgain: the pass that builds a
// fleet's workload again (deleted, or left unbuilt by a failed pass) says
// what it created, in one event; a new fleet's objects and an object a
// later spec change brings send none.
func TestCreatedEventOnlyWithTheWorkloadBuiltAgain(t *testing.T) {
	reported := []metav1.Condition{{Type: cachev1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonAllReplicasReady}}
	for _, tc := range []struct {
		name    string
		created []string
		before  []metav1.Condition
		want    string
	}{
		{"a new fleet", []string{"Deployment", "Service", "PodDisruptionBudget"}, nil, ""},
		{"a deleted Deployment built again", []string{"Deployment"}, reported, "created Deployment for cache"},
		{"a deleted StatefulSet and Service built again", []string{"StatefulSet", "Service"}, reported, "created StatefulSet and Service for cache"},
		{"a fleet whose first pass failed, built", []string{"Deployment", "Service", "PodDisruptionBudget"}, reported, "created Deployment, Service and PodDisruptionBudget for cache"},
		{"the budget of a fleet grown to two pods", []string{"PodDisruptionBudget"}, reported, ""},
		{"a NetworkPolicy and a ServiceMonitor turned on", []string{"ServiceMonitor", "NetworkPolicy"}, reported, ""},
		{"a Certificate for TLS turned on", []string{"Certificate"}, reported, ""},
		{"nothing", nil, reported, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var notes []string
			for _, e := range Events("cache", tc.created, tc.before, tc.before) {
				g.Expect(e.Reason).To(Equal("Created"))
				notes = append(notes, e.Message)
			}
			if tc.want == "" {
				g.Expect(notes).To(BeEmpty())
				return
			}
			g.Expect(notes).To(Equal([]string{tc.want}))
		})
	}
}

// TestAvailableFlipsWorthAnEvent: a new fleet's first rollout and a
// scale-up are the user's doing and send nothing; a lost pod, and the fleet
// recovering from it, send one event each.
func TestAvailableFlipsWorthAnEvent(t *testing.T) {
	available := func(s metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: cachev1alpha1.ConditionAvailable, Status: s, Reason: reason, Message: "m"}}
	}
	up := available(metav1.ConditionFalse, cachev1alpha1.ReasonScalingUp)
	notReady := available(metav1.ConditionFalse, cachev1alpha1.ReasonReplicasNotReady)
	ready := available(metav1.ConditionTrue, cachev1alpha1.ReasonAllReplicasReady)
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		want          []string
	}{
		{"a new fleet's first status", nil, up, nil},
		{"a new fleet rolled out", up, ready, nil},
		{"a scale-up begun", ready, up, nil},
		{"a pod lost", ready, notReady, []string{"Warning ReplicasNotReady Available is False: m"}},
		{"a pod lost while scaling up", up, notReady, []string{"Warning ReplicasNotReady Available is False: m"}},
		{"recovered", notReady, ready, []string{"Normal AllReplicasReady Available is True: m"}},
		{"nothing changed", ready, ready, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range Events("cache", nil, tc.before, tc.after) {
				got = append(got, e.Type+" "+e.Reason+" "+e.Message)
			}
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
}
