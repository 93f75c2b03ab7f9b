package desired_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/memcached-operator/internal/controller/desired"
)

// warmPod is pod <ordinal> of the StatefulSet "cache": its revision, its
// template annotation, the image its spec names (the kubelet reports a
// tag of the same image), and whether it is ready.
func warmPod(ordinal int, rev, tpl, image string, ready bool) corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cache-%d", ordinal),
			Labels:      map[string]string{appsv1.ControllerRevisionHashLabelKey: rev},
			Annotations: map[string]string{desired.TemplateAnnotation: tpl}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: image}}},
		Status: corev1.PodStatus{
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "memcached", Image: "docker.io/library/memcached:any-tag", Ready: ready}},
		},
	}
}

// restarted records on a pod the restarts its memcached had when the
// operator changed it (before, unless empty) and the restarts it has now.
func restarted(p corev1.Pod, before string, now int32) corev1.Pod {
	if before != "" {
		p.Annotations[desired.RestartsAnnotation] = before
	}
	p.Status.ContainerStatuses[0].RestartCount = now
	return p
}

// withArgs gives a pod memcached's command line.
func withArgs(p corev1.Pod, args string) corev1.Pod {
	p.Annotations[desired.ArgsAnnotation] = args
	return p
}

func TestNextWarmStep(t *testing.T) {
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Generation: 2},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{desired.TemplateAnnotation: "t1"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:new"}}},
		}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdateRevision: "r2", AvailableReplicas: 3},
	}
	old := func(i int) corev1.Pod { return warmPod(i, "r1", "t1", "memcached:old", true) }
	done := func(i int) corev1.Pod { return warmPod(i, "r2", "t1", "memcached:new", true) }
	const waiting = "waiting for every pod to serve before the next one restarts"
	newArgs := func(s *appsv1.StatefulSet) { s.Spec.Template.Annotations[desired.ArgsAnnotation] = `["-c","2048"]` }
	for _, tt := range []struct {
		name    string
		pods    []corev1.Pod
		allowed *int32
		mutate  func(*appsv1.StatefulSet)
		want    desired.WarmStep
	}{
		{name: "the highest ordinal first, in place: only the image differs; memcached restarts",
			pods: []corev1.Pod{old(0), old(1), restarted(old(2), "", 2)},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:new", Revision: "r2", Restart: true, Restarts: 2}},
		{name: "not while the pod changed in place has not restarted yet (whatever image name the kubelet reports)",
			pods: []corev1.Pod{old(0), old(1), restarted(done(2), "2", 2)},
			want: desired.WarmStep{Wait: waiting, Restarting: 1}},
		{name: "then the next, once the previous restarted and is ready",
			pods: []corev1.Pod{old(0), old(1), restarted(done(2), "2", 3)}, allowed: ptr.To[int32](1),
			want: desired.WarmStep{Pod: "cache-1", InPlace: true, Image: "memcached:new", Revision: "r2", Restart: true}},
		{name: "a pod whose revision alone differs is relabelled, with no restart to wait for",
			pods: []corev1.Pod{done(0), done(1), warmPod(2, "r1", "t1", "memcached:new", true)},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:new", Revision: "r2"}},
		{name: "not while a pod is not ready",
			pods: []corev1.Pod{old(0), warmPod(1, "r1", "t1", "memcached:old", false), old(2)},
			want: desired.WarmStep{Wait: waiting}},
		{name: "not while a pod is missing",
			pods: []corev1.Pod{old(0), old(2)},
			want: desired.WarmStep{Wait: waiting}},
		{name: "not while the budget allows no disruption",
			pods: []corev1.Pod{old(0), old(1), old(2)}, allowed: ptr.To[int32](0),
			want: desired.WarmStep{Wait: "the PodDisruptionBudget allows no disruption now"}},
		{name: "not before the StatefulSet has observed its template",
			pods: []corev1.Pod{old(0), old(1), old(2)}, mutate: func(s *appsv1.StatefulSet) { s.Status.ObservedGeneration = 1 },
			want: desired.WarmStep{Wait: "the StatefulSet has not observed its template yet"}},
		{name: "a pod whose template differs in more than the image and command line is replaced",
			pods: []corev1.Pod{old(0), old(1), warmPod(2, "r1", "t0", "memcached:old", true)},
			want: desired.WarmStep{Pod: "cache-2", Revision: "r2"}},
		{name: "a pod from before warm restarts (no annotation) is replaced",
			pods: []corev1.Pod{old(0), old(1), warmPod(2, "r1", "", "memcached:old", true)},
			want: desired.WarmStep{Pod: "cache-2", Revision: "r2"}},
		{name: "a new command line alone is set in place, with the restarts memcached had before",
			pods:   []corev1.Pod{done(0), done(1), restarted(withArgs(warmPod(2, "r1", "t1", "memcached:new", true), `["-c","1024"]`), "", 3)},
			mutate: newArgs,
			want:   desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:new", Revision: "r2", Args: `["-c","2048"]`, Restart: true, Restarts: 3}},
		{name: "the pod counts as restarting until its memcached restarted with the new command line",
			pods:   []corev1.Pod{old(0), old(1), restarted(withArgs(done(2), `["-c","2048"]`), "3", 3)},
			mutate: newArgs,
			want:   desired.WarmStep{Wait: waiting, Restarting: 1}},
		{name: "then the next pod, its image and command line at once",
			pods:   []corev1.Pod{withArgs(old(0), `["-c","1024"]`), withArgs(old(1), `["-c","1024"]`), restarted(withArgs(done(2), `["-c","2048"]`), "3", 4)},
			mutate: newArgs,
			want:   desired.WarmStep{Pod: "cache-1", InPlace: true, Image: "memcached:new", Revision: "r2", Args: `["-c","2048"]`, Restart: true}},
		{name: "nothing left to do",
			pods: []corev1.Pod{done(0), done(1), done(2)},
			want: desired.WarmStep{}},
		{name: "pods beyond the size, or not the StatefulSet's, do not count",
			pods: []corev1.Pod{done(0), done(1), done(2), old(3), func() corev1.Pod { p := old(1); p.Name = "cache-x"; return p }()},
			want: desired.WarmStep{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := set.DeepCopy()
			if tt.mutate != nil {
				tt.mutate(s)
			}
			g.Expect(desired.NextWarmStep(s, tt.pods, tt.allowed)).To(Equal(tt.want))
		})
	}
}

// sized gives a pod (or, with a nil volume, the template) memcached's item
// memory and memory limit, and its memory volume.
func sized(p *corev1.Pod, mb int, limit, volume string) {
	p.Annotations[desired.ArgsAnnotation] = fmt.Sprintf(`["-m","%d","-c","1024"]`, mb)
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}, Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
	if volume != "" {
		p.Spec.Volumes = []corev1.Volume{{Name: "memory-file", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse(volume))}}}}
	}
}

// reporting has the kubelet report a memory limit for memcached.
func reporting(p corev1.Pod, limit string) corev1.Pod {
	p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
	return p
}

func withCondition(p corev1.Pod, c corev1.PodCondition) corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, c)
	return p
}

// TestNextWarmStepResize: a change of memory resizes the pod in place and
// copies its cache: the resize before the new command line when the
// memory grows, after it when it shrinks, each step waited for; a pod
// without room for the copy, or that its node cannot resize, is replaced.
func TestNextWarmStepResize(t *testing.T) {
	template := func(mb int, limit string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "cache", Generation: 2},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{desired.TemplateAnnotation: "t1", desired.LegacyTemplateAnnotation: "v1"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1"}}},
			}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, UpdateRevision: "r2", AvailableReplicas: 3},
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: s.Spec.Template.Annotations}, Spec: s.Spec.Template.Spec}
		sized(p, mb, limit, "")
		s.Spec.Template.Annotations, s.Spec.Template.Spec = p.Annotations, p.Spec
		// The template keeps limits alone; the API server defaults a pod's requests to them.
		s.Spec.Template.Spec.Containers[0].Resources.Requests = nil
		return s
	}
	pod := func(i int, rev string, mb int, limit, volume string) corev1.Pod {
		p := warmPod(i, rev, "t1", "memcached:1", true)
		sized(&p, mb, limit, volume)
		return reporting(p, limit)
	}
	small, large := template(72, "80Mi"), template(115, "128Mi")
	const waiting = "waiting for every pod to serve before the next one restarts"
	grown := resource.MustParse("128Mi")
	resized := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: grown}, Requests: corev1.ResourceList{corev1.ResourceMemory: grown}}
	shrunk := resource.MustParse("80Mi")
	for _, tt := range []struct {
		name string
		set  *appsv1.StatefulSet
		pods []corev1.Pod
		want desired.WarmStep
	}{
		{name: "growing: the resize first, the pod left outdated",
			set:  large,
			pods: []corev1.Pod{pod(0, "r1", 72, "80Mi", "146Mi"), pod(1, "r1", 72, "80Mi", "146Mi"), pod(2, "r1", 72, "80Mi", "146Mi")},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Revision: "r2", Resize: &resized, Partial: true}},
		{name: "then a wait while the kubelet has not resized",
			set:  large,
			pods: []corev1.Pod{pod(0, "r1", 72, "80Mi", "146Mi"), pod(1, "r1", 72, "80Mi", "146Mi"), reporting(pod(2, "r1", 72, "128Mi", "146Mi"), "80Mi")},
			want: desired.WarmStep{Wait: waiting, Restarting: 1}},
		{name: "or says the resize is in progress",
			set: large,
			pods: []corev1.Pod{pod(0, "r1", 72, "80Mi", "146Mi"), pod(1, "r1", 72, "80Mi", "146Mi"),
				withCondition(pod(2, "r1", 72, "128Mi", "146Mi"), corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue})},
			want: desired.WarmStep{Wait: waiting, Restarting: 1}},
		{name: "then the new command line, which copies the cache, and the pod is done",
			set:  large,
			pods: []corev1.Pod{pod(0, "r1", 72, "80Mi", "146Mi"), pod(1, "r1", 72, "80Mi", "146Mi"), restarted(pod(2, "r1", 72, "128Mi", "146Mi"), "", 1)},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:1", Revision: "r2", Args: `["-m","115","-c","1024"]`, Restart: true, Restarts: 1}},
		{name: "shrinking: the new command line first, the pod left outdated",
			set:  small,
			pods: []corev1.Pod{pod(0, "r1", 115, "128Mi", "232Mi"), pod(1, "r1", 115, "128Mi", "232Mi"), pod(2, "r1", 115, "128Mi", "232Mi")},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:1", Revision: "r2", Args: `["-m","72","-c","1024"]`, Restart: true, Partial: true}},
		{name: "a resize the kubelet fails is waited for, its message said: the pod serves its new item memory under its old limit",
			set: small,
			pods: []corev1.Pod{pod(0, "r1", 115, "128Mi", "296Mi"), pod(1, "r1", 115, "128Mi", "296Mi"),
				withCondition(reporting(pod(2, "r1", 72, "80Mi", "296Mi"), "128Mi"), corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue,
					Reason: corev1.PodReasonError, Message: "cannot decrease memory limits: missing container \"memcached\" memory usage"})},
			want: desired.WarmStep{Wait: `the kubelet has not resized pod cache-2 yet: cannot decrease memory limits: missing container "memcached" memory usage`, Restarting: 1}},
		{name: "then the resize, and the pod is done",
			set:  small,
			pods: []corev1.Pod{pod(0, "r1", 115, "128Mi", "232Mi"), pod(1, "r1", 115, "128Mi", "232Mi"), pod(2, "r1", 72, "128Mi", "232Mi")},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Revision: "r2",
				Resize: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: shrunk}, Requests: corev1.ResourceList{corev1.ResourceMemory: shrunk}}}},
		{name: "a pod whose volume has no room for the new file is replaced",
			set:  large,
			pods: []corev1.Pod{pod(0, "r1", 72, "80Mi", "146Mi"), pod(1, "r1", 72, "80Mi", "146Mi"), pod(2, "r1", 72, "80Mi", "115Mi")},
			want: desired.WarmStep{Pod: "cache-2", Revision: "r2"}},
		{name: "a pod grown past the memory it was made with shrinks in place: the copy takes what room is left",
			set:  small,
			pods: []corev1.Pod{pod(0, "r1", 115, "128Mi", "146Mi"), pod(1, "r1", 115, "128Mi", "146Mi"), pod(2, "r1", 115, "128Mi", "146Mi")},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:1", Revision: "r2", Args: `["-m","72","-c","1024"]`, Restart: true, Partial: true}},
		{name: "as is one whose new item memory outgrows its volume",
			set:  template(200, "224Mi"),
			pods: []corev1.Pod{pod(0, "r1", 72, "80Mi", "146Mi"), pod(1, "r1", 72, "80Mi", "146Mi"), pod(2, "r1", 72, "80Mi", "146Mi")},
			want: desired.WarmStep{Pod: "cache-2", Revision: "r2"}},
		{name: "and one whose node cannot resize it",
			set: large,
			pods: []corev1.Pod{pod(0, "r1", 72, "80Mi", "146Mi"), pod(1, "r1", 72, "80Mi", "146Mi"),
				withCondition(pod(2, "r1", 72, "128Mi", "146Mi"), corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible})},
			want: desired.WarmStep{Pod: "cache-2", Revision: "r2"}},
		{name: "a pod of an operator before resizes matches the legacy name",
			set: func() *appsv1.StatefulSet {
				s := large.DeepCopy()
				s.Spec.Template.Spec.Containers[0].Image = "memcached:2"
				return s
			}(),
			pods: []corev1.Pod{pod(0, "r1", 115, "128Mi", "116Mi"), pod(1, "r1", 115, "128Mi", "116Mi"),
				func() corev1.Pod {
					p := pod(2, "r1", 115, "128Mi", "116Mi")
					p.Annotations[desired.TemplateAnnotation] = "v1"
					return p
				}()},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:2", Revision: "r2", Restart: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(desired.NextWarmStep(tt.set, tt.pods, nil)).To(Equal(tt.want))
		})
	}
}
