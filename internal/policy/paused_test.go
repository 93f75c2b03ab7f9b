package policy_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// TestPaused: only "true" pauses; any other spelling leaves the operator at
// work, so a fleet is never paused by a value meant to say the opposite.
func TestPaused(t *testing.T) {
	for value, paused := range map[string]bool{"true": true, "True": false, "TRUE": false, "yes": false, "1": false, "false": false, "": false, " true": false} {
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{cachev1alpha1.PausedAnnotation: value}}}
		NewWithT(t).Expect(policy.Paused(mc)).To(Equal(paused), "%q", value)
	}
	NewWithT(t).Expect(policy.Paused(&cachev1alpha1.Memcached{})).To(BeFalse(), "no annotation")
}

// TestPausedUpdateWarns: a spec change to a paused fleet is admitted and
// told that it waits for the pause to end.
func TestPausedUpdateWarns(t *testing.T) {
	g := NewWithT(t)
	old := defaulted(nil)
	mc := defaulted(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](4) })
	_, warnings := policy.ValidateUpdate(old, mc, policy.Limits{})
	g.Expect(warnings).NotTo(ContainElement(policy.PausedWarning))
	mc.Annotations = map[string]string{cachev1alpha1.PausedAnnotation: "true"}
	errs, warnings := policy.ValidateUpdate(old, mc, policy.Limits{})
	g.Expect(errs).To(BeEmpty())
	g.Expect(warnings).To(ContainElement(policy.PausedWarning))
}
