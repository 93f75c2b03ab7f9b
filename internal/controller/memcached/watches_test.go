package memcached

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
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
