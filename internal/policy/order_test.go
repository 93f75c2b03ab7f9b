package policy_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// A spec with several errors in maps (resources, affinity kinds, label
// key lists, node inclusion policies) gets the same errors, in the same
// order and on the same fields, at every review: users and scripts compare
// messages, and a key in two lists must be blamed in one place.
func TestValidateCreateErrorsComeInOneOrder(t *testing.T) {
	bad := ptr.To(corev1.NodeInclusionPolicy("Sometimes"))
	term := corev1.PodAffinityTerm{
		TopologyKey:       "kubernetes.io/hostname",
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}},
		MatchLabelKeys:    []string{"pod-template-hash"},
		MismatchLabelKeys: []string{"pod-template-hash"},
	}
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "team-a"},
		Spec: cachev1alpha1.MemcachedSpec{
			Size: ptr.To[int32](3),
			Resources: &corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"), "gpu": resource.MustParse("1")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi"), "disk": resource.MustParse("-1")},
			},
			Affinity: &corev1.Affinity{
				PodAffinity:     &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}},
				PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}},
			},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector:      &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cache"}},
				NodeAffinityPolicy: bad, NodeTaintsPolicy: bad,
			}},
		},
	}
	first, _ := policy.ValidateCreate(mc, policy.Limits{MaxSize: 10})
	if len(first) < 8 {
		t.Fatalf("the spec must break a rule in each map, got %d errors: %v", len(first), first)
	}
	for range 50 {
		errs, _ := policy.ValidateCreate(mc, policy.Limits{MaxSize: 10})
		if errs.ToAggregate().Error() != first.ToAggregate().Error() {
			t.Fatalf("errors changed between two reviews of one spec:\n%v\n%v", first, errs)
		}
	}
}
