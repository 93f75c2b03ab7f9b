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
// template annotation, the image its spec names and the one its memcached
// runs, and whether it is ready.
func warmPod(ordinal int, rev, tpl, specImage, running string, ready bool) corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cache-%d", ordinal),
			Labels:      map[string]string{appsv1.ControllerRevisionHashLabelKey: rev},
			Annotations: map[string]string{desired.TemplateAnnotation: tpl}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: specImage}}},
		Status: corev1.PodStatus{
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "memcached", Image: running, Ready: ready}},
		},
	}
}

// withArgs gives a pod memcached's command line and, when restarts is not
// empty, the restarts its container had when the command line changed, and
// the restarts it has now.
func withArgs(p corev1.Pod, args, restarts string, count int32) corev1.Pod {
	p.Annotations[desired.ArgsAnnotation] = args
	if restarts != "" {
		p.Annotations[desired.RestartsAnnotation] = restarts
	}
	p.Status.ContainerStatuses[0].RestartCount = count
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
	old := func(i int) corev1.Pod {
		return warmPod(i, "r1", "t1", "memcached:old", "docker.io/library/memcached:old", true)
	}
	done := func(i int) corev1.Pod {
		return warmPod(i, "r2", "t1", "memcached:new", "docker.io/library/memcached:new", true)
	}
	newArgs := func(s *appsv1.StatefulSet) { s.Spec.Template.Annotations[desired.ArgsAnnotation] = `["-c","2048"]` }
	for _, tt := range []struct {
		name    string
		pods    []corev1.Pod
		allowed *int32
		mutate  func(*appsv1.StatefulSet)
		want    desired.WarmStep
	}{
		{name: "the highest ordinal first, in place: only the image differs",
			pods: []corev1.Pod{old(0), old(1), old(2)},
			want: desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:new", Revision: "r2"}},
		{name: "then the next, once the previous runs its new image and is ready",
			pods: []corev1.Pod{old(0), old(1), done(2)}, allowed: ptr.To[int32](1),
			want: desired.WarmStep{Pod: "cache-1", InPlace: true, Image: "memcached:new", Revision: "r2"}},
		{name: "not while the pod changed in place has not restarted yet",
			pods: []corev1.Pod{old(0), old(1), warmPod(2, "r2", "t1", "memcached:new", "docker.io/library/memcached:old", true)},
			want: desired.WarmStep{Wait: "waiting for every pod to serve before the next one restarts", Restarting: 1}},
		{name: "not while a pod is not ready",
			pods: []corev1.Pod{old(0), warmPod(1, "r1", "t1", "memcached:old", "memcached:old", false), old(2)},
			want: desired.WarmStep{Wait: "waiting for every pod to serve before the next one restarts"}},
		{name: "not while a pod is missing",
			pods: []corev1.Pod{old(0), old(2)},
			want: desired.WarmStep{Wait: "waiting for every pod to serve before the next one restarts"}},
		{name: "not while the budget allows no disruption",
			pods: []corev1.Pod{old(0), old(1), old(2)}, allowed: ptr.To[int32](0),
			want: desired.WarmStep{Wait: "the PodDisruptionBudget allows no disruption now"}},
		{name: "not before the StatefulSet has observed its template",
			pods: []corev1.Pod{old(0), old(1), old(2)}, mutate: func(s *appsv1.StatefulSet) { s.Status.ObservedGeneration = 1 },
			want: desired.WarmStep{Wait: "the StatefulSet has not observed its template yet"}},
		{name: "a pod whose template differs in more than the image is replaced",
			pods: []corev1.Pod{old(0), old(1), warmPod(2, "r1", "t0", "memcached:old", "memcached:old", true)},
			want: desired.WarmStep{Pod: "cache-2", Revision: "r2"}},
		{name: "a pod from before warm restarts (no annotation) is replaced",
			pods: []corev1.Pod{old(0), old(1), warmPod(2, "r1", "", "memcached:old", "memcached:old", true)},
			want: desired.WarmStep{Pod: "cache-2", Revision: "r2"}},
		{name: "a new command line is set in place, with the restarts its memcached had before",
			pods:   []corev1.Pod{old(0), old(1), withArgs(old(2), `["-c","1024"]`, "", 3)},
			mutate: newArgs,
			want:   desired.WarmStep{Pod: "cache-2", InPlace: true, Image: "memcached:new", Revision: "r2", Args: `["-c","2048"]`, Restarts: 3}},
		{name: "the pod counts as restarting until its memcached restarted with the new command line",
			pods:   []corev1.Pod{old(0), old(1), withArgs(done(2), `["-c","2048"]`, "3", 3)},
			mutate: newArgs,
			want:   desired.WarmStep{Wait: "waiting for every pod to serve before the next one restarts", Restarting: 1}},
		{name: "then the next pod",
			pods:   []corev1.Pod{withArgs(old(0), `["-c","1024"]`, "", 0), withArgs(old(1), `["-c","1024"]`, "", 0), withArgs(done(2), `["-c","2048"]`, "3", 4)},
			mutate: newArgs,
			want:   desired.WarmStep{Pod: "cache-1", InPlace: true, Image: "memcached:new", Revision: "r2", Args: `["-c","2048"]`}},
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

func TestSameImage(t *testing.T) {
	g := NewWithT(t)
	g.Expect(desired.SameImage("memcached:1.6", "docker.io/library/memcached:1.6")).To(BeTrue())
	g.Expect(desired.SameImage("bitnami/memcached:1", "docker.io/bitnami/memcached:1")).To(BeTrue())
	g.Expect(desired.SameImage("localhost/memcached:a", "localhost/memcached:a")).To(BeTrue())
	g.Expect(desired.SameImage("registry:5000/memcached:a", "registry:5000/memcached:a")).To(BeTrue())
	g.Expect(desired.SameImage("memcached:1.6", "memcached:1.7")).To(BeFalse())
	g.Expect(desired.SameImage("localhost/memcached:a", "docker.io/library/memcached:a")).To(BeFalse())
}
