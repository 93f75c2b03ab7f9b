package status

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/memcached-operator/internal/controller/fleettest"
)

func TestUnschedulable(t *testing.T) {
	g := NewWithT(t)
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }
	n, msg := Unschedulable([]corev1.Pod{*fleettest.Pod("c", "no node c"), *fleettest.Pod("a", ""), *fleettest.Pod("b", "no node b"), *fleettest.Pod("d", "gone", deleting)})
	g.Expect(n).To(Equal(2), "a pod being deleted is not waited for")
	g.Expect(msg).To(Equal("no node b"), "the first by name, so passes agree")
	n, msg = Unschedulable(nil)
	g.Expect(n).To(BeZero())
	g.Expect(msg).To(BeEmpty())
}
