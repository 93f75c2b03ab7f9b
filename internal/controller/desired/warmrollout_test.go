package desired_test

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
