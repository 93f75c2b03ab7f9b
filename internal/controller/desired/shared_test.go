package desired_test

import (
	"encoding/json"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/fleettest"
)

// quantity matches a quantity's JSON string.
var quantity = regexp.MustCompile(`"[0-9]+(m|Ki|Mi|Gi)"`)

// TestDecodingIntoADesiredObjectChangesNothingElse: the client decodes the
// API server's answer to an apply into the desired object, concurrently in
// the passes of many fleets, so a desired object may share no map with the
// Memcached it is built from or with the package's defaults (a shared
// resource list crashed the operator with concurrent map writes). Each
// desired workload takes an answer whose every quantity differs; the spec
// and a second build must not change.
func TestDecodingIntoADesiredObjectChangesNothingElse(t *testing.T) {
	limits := func(s *cachev1alpha1.MemcachedSpec) {
		s.Resources = &corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}
	}
	auth := func(s *cachev1alpha1.MemcachedSpec) {
		s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}, ReloaderImage: ptr.To("reloader:1")}
	}
	warm := func(s *cachev1alpha1.MemcachedSpec) {
		s.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
		s.WarmRestart = &cachev1alpha1.WarmRestartSpec{Enabled: true, LauncherImage: ptr.To("operator:test")}
	}
	for name, mutates := range map[string][]func(*cachev1alpha1.MemcachedSpec){
		"resources":               {limits},
		"auth reloader":           {auth},
		"auth reloader, limits":   {auth, limits},
		"warm restarts":           {warm},
		"warm restarts, limits":   {warm, limits},
		"warm restarts, auth too": {warm, auth},
	} {
		t.Run(name, func(t *testing.T) {
			build := func() (*cachev1alpha1.Memcached, *cachev1alpha1.MemcachedSpec, any) {
				mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
					for _, m := range mutates {
						m(s)
					}
				})
				if spec.Workload != nil && *spec.Workload == cachev1alpha1.WorkloadStatefulSet {
					return mc, spec, desired.StatefulSet(mc, spec)
				}
				return mc, spec, desired.Deployment(mc, spec)
			}
			mc, spec, obj := build()
			mcBefore, specBefore := mc.DeepCopy(), spec.DeepCopy()
			want, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if !quantity.Match(want) {
				t.Fatalf("no quantity in %s", want)
			}
			answer := quantity.ReplaceAll(want, []byte(`"777Mi"`))
			if err := json.Unmarshal(answer, obj); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(mc, mcBefore) || !equality.Semantic.DeepEqual(spec, specBefore) {
				t.Errorf("decoding into the desired object changed the fleet's spec:\n%+v\nwas\n%+v", spec.Resources, specBefore.Resources)
			}
			_, _, again := build()
			if got, _ := json.Marshal(again); string(got) != string(want) {
				t.Errorf("decoding into the desired object changed the next build:\n%s\nwas\n%s", got, want)
			}
		})
	}
}
