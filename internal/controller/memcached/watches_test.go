package memcached

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/example/memcached-operator/internal/controller/queue"
)

// TestFollowedKindsAreFollowUps: every kind the controller watches besides
// the Memcached, its auth Secret and its Certificate is ranked as a
// follow-up, and the three whose updates come in a rollout's bursts are
// gathered for queue.Settle.
func TestFollowedKindsAreFollowUps(t *testing.T) {
	g := NewWithT(t)
	settle := map[string]time.Duration{}
	for _, w := range followed(&handler.EnqueueRequestForObject{}) {
		f, ok := w.handler.(queue.FollowUp)
		g.Expect(ok).To(BeTrue(), "%T", w.object)
		settle[fmt.Sprintf("%T", w.object)] = f.Settle
	}
	g.Expect(settle).To(Equal(map[string]time.Duration{
		"*v1.Deployment": queue.Settle, "*v1.StatefulSet": queue.Settle, "*v1.EndpointSlice": queue.Settle,
		"*v1.Service": 0, "*v1.PodDisruptionBudget": 0, "*v1.NetworkPolicy": 0, "*v1.Pod": 0,
	}))
}

// TestRolloutEndIsNotAFollowUp: the Deployment's and the StatefulSet's
// update that ends a rollout is told apart from the updates of its
// progress, from one that changes nothing of an ended rollout (a resync,
// an annotation), and from the start of the next.
func TestRolloutEndIsNotAFollowUp(t *testing.T) {
	deployment := func(gen, observed int64, desired, replicas, updated, available int32) client.Object {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(desired)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: available, AvailableReplicas: available}}
	}
	statefulSet := func(gen, observed int64, desired, replicas, updated, available int32) client.Object {
		return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(desired)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: available, AvailableReplicas: available}}
	}
	for kind, w := range map[string]func(gen, observed int64, desired, replicas, updated, available int32) client.Object{
		"Deployment": deployment, "StatefulSet": statefulSet,
	} {
		t.Run(kind, func(t *testing.T) {
			g := NewWithT(t)
			for _, c := range []struct {
				name     string
				old, new client.Object
				ends     bool
			}{
				{"the last new pod available", w(2, 2, 2, 2, 2, 1), w(2, 2, 2, 2, 2, 2), true},
				{"the last old pod gone", w(2, 2, 2, 3, 2, 3), w(2, 2, 2, 2, 2, 2), true},
				{"the new spec seen with nothing to roll", w(2, 1, 2, 2, 2, 2), w(2, 2, 2, 2, 2, 2), true},
				{"a new pod available, one to go", w(2, 2, 3, 3, 1, 1), w(2, 2, 3, 3, 2, 2), false},
				{"the new spec not seen yet", w(2, 1, 2, 1, 1, 1), w(2, 1, 2, 2, 2, 2), false},
				{"an old pod left", w(2, 2, 2, 3, 2, 1), w(2, 2, 2, 3, 2, 2), false},
				{"an ended rollout updated again", w(2, 2, 2, 2, 2, 2), w(2, 2, 2, 2, 2, 2), false},
				{"the next rollout started", w(2, 2, 2, 2, 2, 2), w(3, 2, 2, 2, 2, 2), false},
			} {
				g.Expect(rolloutEnded(c.old, c.new)).To(Equal(c.ends), c.name)
			}
		})
	}
	g := NewWithT(t)
	g.Expect(rolloutEnded(&corev1.Service{}, &corev1.Service{})).To(BeFalse(), "only a workload's rollout ends")
	for _, w := range followed(&handler.EnqueueRequestForObject{}) {
		f := w.handler.(queue.FollowUp)
		switch w.object.(type) {
		case *appsv1.Deployment, *appsv1.StatefulSet:
			g.Expect(f.Ends).NotTo(BeNil(), "%T", w.object)
		default:
			g.Expect(f.Ends).To(BeNil(), "%T", w.object)
		}
	}
}
