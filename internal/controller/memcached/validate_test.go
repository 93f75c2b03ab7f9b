package memcached

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// TestValidateRatchetsSizeAgainstTheFleetsDeployment judges one
// reconciler's --max-size alone: a fleet running above a cap lowered since
// may shrink, not grow, measured against the Deployment the fleet controls
// and no other.
func TestValidateRatchetsSizeAgainstTheFleetsDeployment(t *testing.T) {
	scheme := unitScheme(NewWithT(t))
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1"}}
	running := func(controlled bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](5)}}
		if controlled {
			d.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(mc, cachev1alpha1.GroupVersion.WithKind("Memcached"))}
		}
		return d
	}
	cfg := policy.Config{DefaultImage: "memcached:test"}
	for _, tc := range []struct {
		name       string
		deployment *appsv1.Deployment
		size       int32
		refused    bool
	}{
		{"no Deployment: within the cap", nil, 3, false},
		{"no Deployment: above the cap", nil, 4, true},
		{"shrinking from 5, still above the cap", running(true), 4, false},
		{"keeping 5", running(true), 5, false},
		{"growing from 5", running(true), 6, true},
		{"a Deployment the fleet does not control sets no floor", running(false), 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := fake.NewClientBuilder().WithScheme(scheme)
			if tc.deployment != nil {
				b = b.WithObjects(tc.deployment)
			}
			r := &Reconciler{Client: b.Build(), Defaults: cfg, Limits: policy.Limits{MaxSize: 3}}
			fleet := mc.DeepCopy()
			fleet.Spec.Size = ptr.To(tc.size)
			s := &scope{original: fleet.DeepCopy(), memcached: fleet, spec: policy.Resolve(&fleet.Spec, cfg)}
			g.Expect(r.validate(context.Background(), s)).To(Succeed())
			if tc.refused {
				g.Expect(s.invalid).To(ConsistOf(HaveField("Field", "spec.size")))
			} else {
				g.Expect(s.invalid).To(BeEmpty())
			}
		})
	}
}

// TestARuleTightenedSinceKeepsTheFleetReconciled: a fleet an operator
// before a rule built goes on being reconciled and resized while it breaks
// that rule as it did, as admission lets its edits through; a new breach is
// refused, and once fixed the rule holds again.
func TestARuleTightenedSinceKeepsTheFleetReconciled(t *testing.T) {
	g := NewWithT(t)
	rig := newRig(t, g, func(*cachev1alpha1.MemcachedSpec) {})
	rig.armed.Store(false)
	ctx := context.Background()
	edit := func(generation int64, change func(*cachev1alpha1.MemcachedSpec)) {
		t.Helper()
		mc := rig.fleet(g)
		change(&mc.Spec)
		mc.Generation = generation
		g.Expect(rig.c.Update(ctx, mc)).To(Succeed())
		g.Expect(rig.pass()).To(Succeed())
	}
	deployment := func() *appsv1.Deployment {
		d := &appsv1.Deployment{}
		g.Expect(rig.c.Get(ctx, client.ObjectKeyFromObject(rig.mc), d)).To(Succeed())
		return d
	}
	degraded := func() metav1.Condition { return rig.condition(g, cachev1alpha1.ConditionDegraded) }
	const seccomp, apparmor = "seccomp.security.alpha.kubernetes.io/pod", "container.apparmor.security.beta.kubernetes.io/memcached"

	// The generation the status observed, as the operator before the
	// reserved-annotation rule admitted and built it.
	edit(1, func(s *cachev1alpha1.MemcachedSpec) { s.PodAnnotations = map[string]string{seccomp: "runtime/default"} })
	g.Expect(degraded().Reason).NotTo(Equal(cachev1alpha1.ReasonInvalidSpec))
	g.Expect(deployment().Annotations).To(HaveKey(AcceptedRulesAnnotation), "the rule it breaks is recorded with what was built")

	edit(2, func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](4) })
	g.Expect(degraded().Reason).NotTo(Equal(cachev1alpha1.ReasonInvalidSpec))
	g.Expect(*deployment().Spec.Replicas).To(Equal(int32(4)), "resized")

	edit(3, func(s *cachev1alpha1.MemcachedSpec) { s.PodAnnotations[apparmor] = "unconfined" })
	g.Expect(degraded()).To(And(HaveField("Reason", cachev1alpha1.ReasonInvalidSpec),
		HaveField("Message", ContainSubstring(apparmor)), HaveField("Message", Not(ContainSubstring(seccomp)))), "only the new breach")

	edit(4, func(s *cachev1alpha1.MemcachedSpec) { s.PodAnnotations = nil })
	g.Expect(degraded().Reason).NotTo(Equal(cachev1alpha1.ReasonInvalidSpec))
	g.Expect(deployment().Annotations).NotTo(HaveKey(AcceptedRulesAnnotation))
	edit(5, func(s *cachev1alpha1.MemcachedSpec) { s.PodAnnotations = map[string]string{seccomp: "runtime/default"} })
	g.Expect(degraded().Reason).To(Equal(cachev1alpha1.ReasonInvalidSpec), "fixed once, the rule holds")
}
