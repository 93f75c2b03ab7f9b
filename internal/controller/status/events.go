package status

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// Event is an event a pass sends about its fleet.
type Event struct {
	Type, Reason, Action, Message string
}

// Events are the events a pass sends: news a user did not ask for. One
// for a workload built again (deleted, or left unbuilt by a failed pass),
// naming everything the pass created in one event; and one for each flip
// of Available or Degraded between before and after. A fleet's own
// creation, its first rollout and any object a spec change brings (the
// PodDisruptionBudget of a fleet grown to two pods, a NetworkPolicy turned
// on) are the user's doing and routine: the status already names that
// generation, and at a thousand new fleets each event is a request the API
// server serves while the fleets wait for theirs. A pass that changed
// nothing sends none, so events stay a history of changes rather than a
// heartbeat; the other conditions tell the same story in kstatus' words.
func Events(name string, created []string, before, after []metav1.Condition) []Event {
	var out []Event
	if len(before) > 0 && slices.ContainsFunc(created, isWorkload) {
		out = append(out, Event{Type: corev1.EventTypeNormal, Reason: "Created", Action: "Create",
			Message: "created " + joinKinds(created) + " for " + name})
	}
	for _, t := range eventConditions {
		c := meta.FindStatusCondition(after, t)
		if !worthAnEvent(meta.FindStatusCondition(before, t), c) {
			continue
		}
		eventType := corev1.EventTypeNormal
		if (t == cachev1alpha1.ConditionDegraded) == (c.Status == metav1.ConditionTrue) {
			eventType = corev1.EventTypeWarning
		}
		out = append(out, Event{Type: eventType, Reason: c.Reason, Action: "Reconcile",
			Message: c.Type + " is " + string(c.Status) + ": " + c.Message})
	}
	return out
}

func isWorkload(kind string) bool { return kind == "Deployment" || kind == "StatefulSet" }

// joinKinds lists kinds as a sentence: "Deployment, Service and PodDisruptionBudget".
func joinKinds(kinds []string) string {
	if len(kinds) == 1 {
		return kinds[0]
	}
	return strings.Join(kinds[:len(kinds)-1], ", ") + " and " + kinds[len(kinds)-1]
}

// eventConditions are the conditions whose changes send events.
var eventConditions = []string{cachev1alpha1.ConditionAvailable, cachev1alpha1.ConditionDegraded}

// worthAnEvent: c, from old, is a change Events sends an event
// for. A condition's first value sends none when it is False.
func worthAnEvent(old, c *metav1.Condition) bool {
	return c != nil && (old != nil || c.Status != metav1.ConditionFalse) && eventWorthy(old, c)
}

// eventWorthy reports whether a condition's change from old to c is news:
// a flip, except into or out of ScalingUp (a scale-up the user asked for
// is no news), and a pod lost while scaling up, which turns ScalingUp into
// another reason.
func eventWorthy(old, c *metav1.Condition) bool {
	scaling := func(c *metav1.Condition) bool { return c.Reason == cachev1alpha1.ReasonScalingUp }
	switch {
	case old == nil:
		return true
	case old.Status != c.Status:
		return !scaling(old) && !scaling(c)
	}
	return scaling(old) && !scaling(c)
}
