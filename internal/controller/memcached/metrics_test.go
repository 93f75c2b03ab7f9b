package memcached

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// TestOnlyTheLeaderReportsFleets: every replica's cache holds every fleet,
// so a standby reports none, and a sum over replicas counts each fleet once.
func TestOnlyTheLeaderReportsFleets(t *testing.T) {
	g := NewWithT(t)
	c := NewFleetCollector(fake.NewClientBuilder().WithScheme(unitScheme(g)).WithObjects(&cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
	}).Build())
	leading := false
	c.Leading = func() bool { return leading }
	reg := prometheus.NewPedanticRegistry()
	g.Expect(reg.Register(c)).To(Succeed())
	g.Expect(testutil.GatherAndCount(reg)).To(BeZero(), "a standby replica")
	leading = true
	g.Expect(testutil.GatherAndCount(reg, "memcached_operator_fleet_pods")).To(Equal(2), "desired and ready of the one fleet")
	g.Expect(testutil.GatherAndCount(reg, "memcached_operator_fleets")).To(Equal(12), "4 conditions × 3 statuses")
}
