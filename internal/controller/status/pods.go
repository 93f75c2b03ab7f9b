package status

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/example/memcached-operator/internal/controller/desired"
)

// ReadyPods are the names of the pods that the slices list as ready, sorted
// and without duplicates (a dual-stack Service has a slice per IP family).
// A missing ready condition counts as ready, as the EndpointSlice API says.
func ReadyPods(items []discoveryv1.EndpointSlice) []string {
	var names []string
	for i := range items {
		for _, ep := range items[i].Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || !ptr.Deref(ep.Conditions.Ready, true) ||
				ptr.Deref(ep.Conditions.Terminating, false) {
				continue
			}
			names = append(names, ep.TargetRef.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Unschedulable counts the pods the scheduler found no node for, and
// returns the message of the first of them by name (stable from pass to
// pass, so an unchanged situation writes no status).
func Unschedulable(pods []corev1.Pod) (int, string) {
	n, first, msg := 0, "", ""
	for i := range pods {
		p := &pods[i]
		if c := UnschedulableCondition(p); c != nil && p.DeletionTimestamp == nil {
			n++
			if first == "" || p.Name < first {
				first, msg = p.Name, c.Message
			}
		}
	}
	return n, msg
}

// UnschedulableCondition is the pod's PodScheduled condition when no node
// fits it; nil otherwise.
func UnschedulableCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c
		}
	}
	return nil
}

// PodReady tells whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// The operator never reads Secrets: whether the auth Secret exists is
// learnt from the fleet's pods, which it already watches. The auth-check
// init container takes the auth file's key as an environment variable
// (desired.AuthPresentEnv), so the kubelet refuses to create it while the Secret or
// its key is missing and says so in the container's status
// (CreateContainerConfigError), where the pod cache keeps it. The volume is
// optional so that this check, not a mount that waits without a word, is
// what holds a new pod back.

// AuthFromPods reads the fleet's pods for what they say of its auth Secret.
func AuthFromPods(pods []corev1.Pod) *AuthObservation {
	a := &AuthObservation{}
	first := ""
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if msg := AuthBlocked(p); msg != "" {
			a.Blocked++
			if first == "" || p.Name < first {
				first, a.Message = p.Name, p.Name+": "+msg
			}
		}
		a.Mounted = a.Mounted || PodReady(p)
	}
	return a
}

// AuthBlocked says why a pod's auth check holds memcached back: the
// kubelet's message while it cannot create the check for want of the Secret
// or its key, or the check's own word on a file memcached would refuse.
// "" when nothing holds the pod back.
func AuthBlocked(p *corev1.Pod) string {
	c := AuthCheckStatus(p)
	switch {
	case c == nil || c.State.Terminated != nil || c.State.Running != nil:
		return ""
	case c.State.Waiting != nil && c.State.Waiting.Reason == reasonCreateContainerConfigError:
		return c.State.Waiting.Message
	case c.LastTerminationState.Terminated != nil && c.LastTerminationState.Terminated.ExitCode != 0:
		return "the auth file: " + c.LastTerminationState.Terminated.Message
	}
	return ""
}

// AuthCheckStatus is the status of the pod's auth-check init container;
// nil when it has none.
func AuthCheckStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.InitContainerStatuses {
		if c := &p.Status.InitContainerStatuses[i]; c.Name == desired.AuthCheckContainerName {
			return c
		}
	}
	return nil
}

// reasonCreateContainerConfigError is the kubelet's waiting reason for a
// container whose environment or mounts cannot be resolved.
const reasonCreateContainerConfigError = "CreateContainerConfigError"
