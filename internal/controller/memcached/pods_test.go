package memcached

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/fleettest"
	"github.com/example/memcached-operator/internal/controller/status"
)

// stripped is p as the pod cache keeps it.
func stripped(g Gomega, p *corev1.Pod) *corev1.Pod {
	out, err := placementOnly(p)
	g.Expect(err).NotTo(HaveOccurred())
	return out.(*corev1.Pod)
}

// TestPlacementOnly: the cached pod keeps what is read, drops the rest,
// and the event filter passes only changes of schedulability and scale-down marks.
func TestPlacementOnly(t *testing.T) {
	g := NewWithT(t)
	strip := func(p *corev1.Pod) *corev1.Pod { return stripped(g, p) }
	waiting := strip(fleettest.Pod("a", "0/3 nodes are available"))
	g.Expect(waiting.Labels).To(HaveKeyWithValue(desired.LabelInstance, "cache"))
	g.Expect(waiting.Spec.Containers).To(BeEmpty())
	n, msg := status.Unschedulable([]corev1.Pod{*waiting})
	g.Expect(n).To(Equal(1))
	g.Expect(msg).To(Equal("0/3 nodes are available"))

	running := strip(fleettest.Pod("a", ""))
	g.Expect(running.Spec.NodeName).To(Equal("n1"), "a scale-down reads where pods run")
	g.Expect(status.PodReady(running)).To(BeTrue())
	g.Expect(running.Status.PodIP).To(BeEmpty(), "the rest of a pod's status is of no use here")
	g.Expect(running.Annotations).To(BeEmpty())
	moved := strip(fleettest.Pod("a", "", func(p *corev1.Pod) { p.Status.PodIP = "10.0.0.2" }))
	marked := strip(fleettest.Pod("a", "", func(p *corev1.Pod) {
		p.Annotations = map[string]string{desired.PodDeletionCost: desired.FirstToGo, "other": "dropped"}
	}))
	g.Expect(marked.Annotations).To(Equal(map[string]string{desired.PodDeletionCost: desired.FirstToGo}))
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: marked})).To(BeTrue(), "a scale-down mark reaching the cache")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: marked, ObjectNew: running})).To(BeTrue(), "and its removal")

	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: moved})).To(BeFalse(), "pod churn is not a scheduling change")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: running, ObjectNew: waiting})).To(BeTrue())
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: waiting, ObjectNew: running})).To(BeTrue(), "scheduled at last")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: waiting, ObjectNew: strip(fleettest.Pod("a", "0/4 nodes are available"))})).To(BeTrue())
	g.Expect(podChanged.Create(event.CreateEvent{Object: running})).To(BeFalse())
	g.Expect(podChanged.Create(event.CreateEvent{Object: waiting})).To(BeTrue())
	g.Expect(podChanged.Delete(event.DeleteEvent{Object: waiting})).To(BeTrue())
	g.Expect(podToMemcached(t.Context(), waiting)).To(HaveLen(1))
	g.Expect(podToMemcached(t.Context(), &corev1.Pod{})).To(BeEmpty())
}

// TestPlacementOnlyKeepsTheAuthCheck: a pod the auth check holds back keeps
// the check's state in the cache, with nothing else of its containers, and
// its coming and going are events.
func TestPlacementOnlyKeepsTheAuthCheck(t *testing.T) {
	g := NewWithT(t)
	strip := func(p *corev1.Pod) *corev1.Pod { return stripped(g, p) }
	check := func(state corev1.ContainerState) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = nil
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "memcached", Image: "memcached:1.6"}}
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "auth-check", Image: "op:1", State: state}}
		}
	}
	missing := strip(fleettest.Pod("a", "", check(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "users" not found`}})))
	g.Expect(missing.Status.InitContainerStatuses).To(HaveLen(1))
	g.Expect(missing.Status.InitContainerStatuses[0].Image).To(BeEmpty())
	g.Expect(missing.Status.ContainerStatuses).To(BeEmpty())
	g.Expect(status.AuthFromPods([]corev1.Pod{*missing})).To(Equal(&status.AuthObservation{Blocked: 1, Message: `a: secret "users" not found`}))

	badFile := strip(fleettest.Pod("a", "", check(corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}), func(p *corev1.Pod) {
		p.Status.InitContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Message: "line 1 has no ':'", Reason: "Error"}
	}))
	g.Expect(status.AuthFromPods([]corev1.Pod{*badFile})).To(Equal(&status.AuthObservation{Blocked: 1, Message: "a: the auth file: line 1 has no ':'"}))

	passed := strip(fleettest.Pod("a", "", check(corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}})))
	g.Expect(passed.Status.InitContainerStatuses).To(BeEmpty(), "a check that passed is of no more use")
	g.Expect(status.AuthFromPods([]corev1.Pod{*passed, *strip(fleettest.Pod("b", ""))})).To(Equal(&status.AuthObservation{Mounted: true}))

	g.Expect(podChanged.Create(event.CreateEvent{Object: missing})).To(BeTrue())
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: missing, ObjectNew: passed})).To(BeTrue(), "the Secret came")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: missing, ObjectNew: badFile})).To(BeTrue(), "the Secret came with a bad file")
	g.Expect(podChanged.Delete(event.DeleteEvent{Object: badFile})).To(BeTrue())
	deleting := *missing
	deleting.DeletionTimestamp = &metav1.Time{}
	g.Expect(status.AuthFromPods([]corev1.Pod{deleting})).To(Equal(&status.AuthObservation{}), "a pod going away is not waited for")
}

// TestPlacementOnlyKeepsTheWarmRollout: a pod of a fleet with warm
// restarts keeps in the cache all that its rollout reads (template,
// command line, restarts before it, memcached's image, readiness and
// restarts), and a restart of memcached or a new command line is an event.
func TestPlacementOnlyKeepsTheWarmRollout(t *testing.T) {
	g := NewWithT(t)
	warm := func(args string, restarts int32) *corev1.Pod {
		return stripped(g, fleettest.Pod("a", "", func(p *corev1.Pod) {
			p.Annotations = map[string]string{desired.TemplateAnnotation: "t1", desired.ArgsAnnotation: args, desired.RestartsAnnotation: "2", "other": "dropped"}
			p.Spec.Containers = []corev1.Container{{Name: "memcached", Image: "memcached:1.6", Args: []string{"dropped"}}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "memcached", Image: "memcached:1.6", Ready: true, RestartCount: restarts}}
		}))
	}
	before := warm(`["-c","1024"]`, 2)
	g.Expect(before.Annotations).To(Equal(map[string]string{desired.TemplateAnnotation: "t1", desired.ArgsAnnotation: `["-c","1024"]`, desired.RestartsAnnotation: "2"}))
	g.Expect(before.Spec.Containers).To(Equal([]corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}))
	g.Expect(before.Status.ContainerStatuses).To(Equal([]corev1.ContainerStatus{{Name: "memcached", Ready: true, RestartCount: 2}}), "not the image the kubelet reports, which the rollout does not read")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: warm(`["-c","1024"]`, 3)})).To(BeTrue(), "memcached restarted")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: warm(`["-c","2048"]`, 2)})).To(BeTrue(), "a new command line")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: warm(`["-c","1024"]`, 2)})).To(BeFalse())
	reported := warm(`["-c","1024"]`, 2)
	reported.Status.ContainerStatuses[0].Image = "docker.io/library/memcached:1.6"
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: reported})).To(BeFalse(), "the kubelet's name for the image is not read")

	// What a resize is paced by: memcached's resources, the memory volume,
	// what the kubelet reports running and the resize's conditions.
	limits := func(mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}
	}
	sized := func(spec, running string, conditions ...corev1.PodCondition) *corev1.Pod {
		return stripped(g, fleettest.Pod("a", "", func(p *corev1.Pod) {
			p.Annotations = map[string]string{desired.TemplateAnnotation: "t1"}
			p.Spec.Containers = []corev1.Container{{Name: "memcached", Image: "memcached:1.6", Resources: corev1.ResourceRequirements{Limits: limits(spec)}}}
			p.Spec.Volumes = []corev1.Volume{{Name: "other"}, {Name: desired.MemoryVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("130Mi"))}}}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "memcached", Resources: &corev1.ResourceRequirements{Limits: limits(running)}}}
			p.Status.Conditions = conditions
		}))
	}
	resizeBefore := sized("128Mi", "128Mi")
	g.Expect(resizeBefore.Spec.Containers[0].Resources.Limits).To(Equal(limits("128Mi")))
	g.Expect(resizeBefore.Spec.Volumes).To(ConsistOf(HaveField("Name", desired.MemoryVolumeName)))
	g.Expect(resizeBefore.Status.ContainerStatuses[0].Resources.Limits).To(Equal(limits("128Mi")))
	inProgress := corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}
	g.Expect(sized("160Mi", "128Mi", inProgress).Status.Conditions).To(ConsistOf(inProgress))
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: resizeBefore, ObjectNew: sized("160Mi", "128Mi")})).To(BeTrue(), "resized")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: sized("160Mi", "128Mi"), ObjectNew: sized("160Mi", "128Mi", inProgress)})).To(BeTrue(), "resizing")
	g.Expect(podChanged.Update(event.UpdateEvent{ObjectOld: sized("160Mi", "128Mi", inProgress), ObjectNew: sized("160Mi", "160Mi")})).To(BeTrue(), "the kubelet resized")
}
