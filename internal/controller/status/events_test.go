package status

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestCreatedEventOnlyWithTheWorkload: the pass that builds a fleet (or
// builds its deleted workload again) says what it created, in one event;
// an object a later spec change brings sends none.
func TestCreatedEventOnlyWithTheWorkload(t *testing.T) {
	for _, tc := range []struct {
		name    string
		created []string
		want    string
	}{
		{"a new fleet", []string{"Deployment", "Service", "PodDisruptionBudget"}, "created Deployment, Service and PodDisruptionBudget for cache"},
		{"a new stable fleet", []string{"StatefulSet", "Service"}, "created StatefulSet and Service for cache"},
		{"a deleted Deployment built again", []string{"Deployment"}, "created Deployment for cache"},
		{"the budget of a fleet grown to two pods", []string{"PodDisruptionBudget"}, ""},
		{"a NetworkPolicy and a ServiceMonitor turned on", []string{"ServiceMonitor", "NetworkPolicy"}, ""},
		{"a Certificate for TLS turned on", []string{"Certificate"}, ""},
		{"nothing", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var notes []string
			for _, e := range Events("cache", tc.created, nil, nil) {
				g.Expect(e.Reason).To(Equal("Created"))
				notes = append(notes, e.Message)
			}
			if tc.want == "" {
				g.Expect(notes).To(BeEmpty())
				return
			}
			g.Expect(notes).To(Equal([]string{tc.want}))
		})
	}
}
