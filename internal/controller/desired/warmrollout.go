package desired

import (
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// RestartsAnnotation records, on a warm fleet's pod the operator changed
// in place, how many restarts its memcached container had then: the change
// is done once the container has restarted since. (The image the kubelet
// reports cannot tell: two tags of one image report the same name.)
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
	// Args, when not empty, is the pod's new ArgsAnnotation.
	Args string
	// Restart: the change restarts memcached's container, which had
	// Restarts restarts before it (RestartsAnnotation).
	Restart  bool
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
		if !restartedSinceChange(p) {
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
		step.Image = memcachedImage(set.Spec.Template.Spec.Containers)
		if args := set.Spec.Template.Annotations[ArgsAnnotation]; args != p.Annotations[ArgsAnnotation] {
			step.Args = args
		}
		if step.Args != "" || step.Image != memcachedImage(p.Spec.Containers) {
			step.Restart, step.Restarts = true, memcachedRestarts(p)
		}
	}
	return step
}

func memcachedImage(containers []corev1.Container) string {
	for _, c := range containers {
		if c.Name == containerName {
			return c.Image
		}
	}
	return ""
}

// restartedSinceChange tells whether a pod's memcached container restarted
// since the operator last changed it in place: the kubelet restarts it for
// a new image, the launcher ends it for a new command line.
func restartedSinceChange(p *corev1.Pod) bool {
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
