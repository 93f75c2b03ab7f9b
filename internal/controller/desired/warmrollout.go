package desired

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/example/memcached-operator/internal/policy"
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
	// Resize, when set, is the memcached container's new resources, made
	// in place (the pod's resize subresource) before anything else when the
	// memory grows, after the new command line when it shrinks.
	Resize *corev1.ResourceRequirements
	// Partial: the step leaves the pod outdated, with another step to come;
	// its revision label stays. (A resize never relabels: the pass after it
	// does.)
	Partial bool
	// Restarting counts the pods changed in place whose memcached has not
	// restarted with the change yet, or whose resize is not done.
	Restarting int
}

// NextWarmStep paces the rollout of a warm StatefulSet (OnDelete): one pod
// at a time, highest ordinal first, and only while every pod serves the
// image its spec names and the budget allows a disruption (nil: the fleet
// has none). A pod whose template differs from the StatefulSet's in
// memcached's image, command line and resources alone (TemplateAnnotation)
// takes them in place and keeps its cache, when its memory volume has room
// for a copy of the cache wherever the change needs one; any other pod is
// replaced.
func NextWarmStep(set *appsv1.StatefulSet, pods []corev1.Pod, disruptionsAllowed *int32) WarmStep {
	var step WarmStep
	rev := set.Status.UpdateRevision
	replicas := int(ptr.Deref(set.Spec.Replicas, 1))
	type member struct {
		ordinal int
		pod     *corev1.Pod
	}
	var live, outdated []member
	unready, resizeError := 0, ""
	for i := range pods {
		p := &pods[i]
		ordinal, ok := Ordinal(set.Name, p.Name)
		if !ok || p.DeletionTimestamp != nil || ordinal >= replicas {
			continue
		}
		live = append(live, member{ordinal, p})
		if !restartedSinceChange(p) || resizing(p) {
			step.Restarting++
		}
		if msg := resizeFailing(p); msg != "" {
			resizeError = "the kubelet has not resized pod " + p.Name + " yet: " + msg
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
	case resizeError != "":
		// The pod serves, with its new item memory, under its old limit:
		// nothing is lost by waiting for the kubelet's retries.
		step.Wait, step.Restarting = resizeError, max(step.Restarting, 1)
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
	if !sameTemplate(set.Spec.Template.Annotations, p.Annotations) || resizeInfeasible(p) {
		return step
	}
	tplArgs := set.Spec.Template.Annotations[ArgsAnnotation]
	image := memcachedImage(set.Spec.Template.Spec.Containers)
	argsChange := tplArgs != p.Annotations[ArgsAnnotation]
	imageChange := image != memcachedImage(p.Spec.Containers)
	want := PodResources(memcachedContainer(set.Spec.Template.Spec.Containers).Resources)
	have := memcachedContainer(p.Spec.Containers).Resources
	resize := !apiequality.Semantic.DeepEqual(want, PodResources(have))
	if resize && !roomForCopy(p, tplArgs) {
		return step // replaced: no room for a copy of the cache
	}
	step.InPlace = true
	if grows := want.Limits.Memory().Cmp(*have.Limits.Memory()) >= 0; resize && (grows || !argsChange && !imageChange) {
		step.Resize, step.Partial = &want, argsChange || imageChange
		return step
	}
	step.Image = image
	if argsChange {
		step.Args = tplArgs
	}
	if argsChange || imageChange {
		step.Restart, step.Restarts = true, memcachedRestarts(p)
	}
	step.Partial = resize
	return step
}

// sameTemplate tells whether a pod's template annotation names the
// template's, as this operator names it or as operators before in-place
// resizes did.
func sameTemplate(template, pod map[string]string) bool {
	have := pod[TemplateAnnotation]
	return have != "" && (have == template[TemplateAnnotation] || have == template[LegacyTemplateAnnotation])
}

// PodResources are a container's resources as the API server keeps them
// in a pod: requests default to limits.
func PodResources(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	r = *r.DeepCopy()
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[name] = limit
		}
	}
	return r
}

// roomForCopy tells whether a pod can keep its cache through a change to
// the command line args that alters a setting of its memory file: its
// memory volume holds the new file (a pod made before in-place resizes,
// whose volume fits one file, matches the template only while its memory
// is unchanged).
func roomForCopy(p *corev1.Pod, args string) bool {
	var before, after []string
	if json.Unmarshal([]byte(p.Annotations[ArgsAnnotation]), &before) != nil || json.Unmarshal([]byte(args), &after) != nil {
		return false
	}
	from, to := policy.MemoryFileSettings(before), policy.MemoryFileSettings(after)
	if maps.Equal(from, to) {
		return true
	}
	toMB, err := strconv.ParseInt(to["-m"], 10, 32)
	if err != nil {
		return false
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == memoryVolumeName && v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			return RoomFor(*v.EmptyDir.SizeLimit, int32(toMB))
		}
	}
	return false
}

// resizing tells whether a pod's resize is not done: pending (but not
// infeasible, which no wait mends) or in progress, or the memory limit the
// kubelet reports differs from the spec's (it has not seen the resize yet).
func resizing(p *corev1.Pod) bool {
	if resizeInfeasible(p) {
		return false
	}
	for _, c := range p.Status.Conditions {
		if (c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == containerName && c.Resources != nil {
			spec := memcachedContainer(p.Spec.Containers).Resources.Limits
			return !c.Resources.Limits.Memory().Equal(*spec.Memory())
		}
	}
	return false
}

// resizeFailing is the kubelet's message when a resize of the pod fails
// (lowering a memory limit needs the container's memory usage, say), else "".
func resizeFailing(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizeInProgress && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonError {
			return c.Message
		}
	}
	return ""
}

// resizeInfeasible: the node cannot give the pod what its resize asks;
// only a new pod, scheduled anew, can have it.
func resizeInfeasible(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonInfeasible {
			return true
		}
	}
	return false
}

func memcachedContainer(containers []corev1.Container) corev1.Container {
	for _, c := range containers {
		if c.Name == containerName {
			return c
		}
	}
	return corev1.Container{}
}

func memcachedImage(containers []corev1.Container) string {
	return memcachedContainer(containers).Image
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
