package desired

import (
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// RestartsAnnotation records, on a warm fleet's pod whose command line
// the operator changed in place, how many restarts its memcached container
// had then: the change is done once the container has restarted since.
const RestartsAnnotation = "memcached.cache.example.com/restarts"

// WarmStep is what the rollout of a fleet with warm restarts does next:
// change one pod's image and command line in place (InPlace), replace one
// pod (not InPlace), or, with no Pod, nothing; Wait then says why, if
// there is something left to do.
type WarmStep struct {
	Pod      string
	InPlace  bool
	Image    string
	Revision string
	// Args, when not empty, is the pod's new ArgsAnnotation, and Restarts
	// its memcached container's restarts before it (RestartsAnnotation).
	Args     string
	Restarts int32
	Wait     string
	// Restarting counts the pods changed in place whose memcached has not
	// restarted with the change yet.
	Restarting int
}

// NextWarmStep paces the rollout of a warm StatefulSet (OnDelete): one pod
// at a time, highest ordinal first, and only while every pod serves the
// image its spec names and the budget allows a disruption (nil: the fleet
// has none). A pod whose template differs from the StatefulSet's in
// memcached's image alone (TemplateAnnotation) takes the new image in place
// and keeps its cache; any other pod is replaced.
func NextWarmStep(set *appsv1.StatefulSet, pods []corev1.Pod, disruptionsAllowed *int32) WarmStep {
	var step WarmStep
	rev := set.Status.UpdateRevision
	replicas := int(ptr.Deref(set.Spec.Replicas, 1))
	type member struct {
		ordinal int
		pod     *corev1.Pod
	}
	var live, outdated []member
	unready := 0
	for i := range pods {
		p := &pods[i]
		ordinal, ok := Ordinal(set.Name, p.Name)
		if !ok || p.DeletionTimestamp != nil || ordinal >= replicas {
			continue
		}
		live = append(live, member{ordinal, p})
		if !runsItsImage(p) || !restartedSinceArgs(p) {
			step.Restarting++
		}
		if !podReady(p) || !memcachedReady(p) {
			unready++
		}
		if rev != "" && p.Labels[appsv1.ControllerRevisionHashLabelKey] != rev {
			outdated = append(outdated, member{ordinal, p})
		}
	}
	switch {
	case set.Status.ObservedGeneration < set.Generation || rev == "":
		step.Wait = "the StatefulSet has not observed its template yet"
		return step
	case len(outdated) == 0:
		return step
	case len(live) < replicas || step.Restarting > 0 || unready > 0 || set.Status.AvailableReplicas < int32(replicas):
		step.Wait = "waiting for every pod to serve before the next one restarts"
		return step
	case disruptionsAllowed != nil && *disruptionsAllowed < 1:
		step.Wait = "the PodDisruptionBudget allows no disruption now"
		return step
	}
	slices.SortFunc(outdated, func(a, b member) int { return b.ordinal - a.ordinal })
	p := outdated[0].pod
	step.Pod, step.Revision = p.Name, rev
	want := set.Spec.Template.Annotations[TemplateAnnotation]
	if want != "" && p.Annotations[TemplateAnnotation] == want {
		step.InPlace = true
		for _, c := range set.Spec.Template.Spec.Containers {
			if c.Name == containerName {
				step.Image = c.Image
			}
		}
		if args := set.Spec.Template.Annotations[ArgsAnnotation]; args != p.Annotations[ArgsAnnotation] {
			step.Args, step.Restarts = args, memcachedRestarts(p)
		}
	}
	return step
}

// restartedSinceArgs tells whether a pod's memcached container restarted
// since the operator last changed its command line (the launcher ends it
// on the change, and the kubelet starts it again with the new one).
func restartedSinceArgs(p *corev1.Pod) bool {
	v, ok := p.Annotations[RestartsAnnotation]
	if !ok {
		return true
	}
	before, err := strconv.ParseInt(v, 10, 32)
	return err != nil || memcachedRestarts(p) > int32(before)
}

func memcachedRestarts(p *corev1.Pod) int32 {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == containerName {
			return c.RestartCount
		}
	}
	return 0
}

// Ordinal is the ordinal of a StatefulSet's pod, from its name.
func Ordinal(set, pod string) (int, bool) {
	s, ok := strings.CutPrefix(pod, set+"-")
	i, err := strconv.Atoi(s)
	return i, ok && err == nil && i >= 0 && strconv.Itoa(i) == s
}

// runsItsImage tells whether a pod's memcached runs the image its spec
// names, or has not started yet: after an image change in place, the
// kubelet restarts it, and only then is the change done.
func runsItsImage(p *corev1.Pod) bool {
	var want string
	for _, c := range p.Spec.Containers {
		if c.Name == containerName {
			want = c.Image
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == containerName {
			return c.Image == "" || SameImage(c.Image, want)
		}
	}
	return true
}

func memcachedReady(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == containerName {
			return c.Ready
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// SameImage compares an image reference as a pod's spec names it with the
// one the kubelet reports, which the runtime may have normalised: a bare
// name is on docker.io, a name without a host in its library.
func SameImage(a, b string) bool {
	return normalImage(a) == normalImage(b)
}

func normalImage(ref string) string {
	host, rest, found := strings.Cut(ref, "/")
	switch {
	case !found:
		return "docker.io/library/" + ref
	case !strings.ContainsAny(host, ".:") && host != "localhost":
		return "docker.io/" + ref
	case host == "index.docker.io":
		return "docker.io/" + rest
	}
	return ref
}
