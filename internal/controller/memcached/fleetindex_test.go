package memcached

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/example/memcached-operator/internal/controller/desired"
)

// withFleetIndexes registers the indexes the manager's cache has, so a fake
// client answers the passes' lists as the cache does.
func withFleetIndexes(b *fake.ClientBuilder) *fake.ClientBuilder {
	return b.WithIndex(&corev1.Pod{}, podFleetIndex, indexPodFleet).
		WithIndex(&discoveryv1.EndpointSlice{}, sliceFleetIndex, indexSliceFleet)
}

// TestFleetIndexes: a fleet's pods and slices are keyed by its name, and
// only when they are ours (the label selectors the lists used before).
func TestFleetIndexes(t *testing.T) {
	g := NewWithT(t)
	meta := func(labels map[string]string) metav1.ObjectMeta { return metav1.ObjectMeta{Labels: labels} }
	g.Expect(indexPodFleet(&corev1.Pod{ObjectMeta: meta(map[string]string{desired.LabelInstance: "a", desired.LabelManagedBy: desired.ManagedByValue})})).To(Equal([]string{"a"}))
	g.Expect(indexPodFleet(&corev1.Pod{ObjectMeta: meta(map[string]string{desired.LabelInstance: "a", desired.LabelManagedBy: "helm"})})).To(BeEmpty(), "a stranger's pod")
	g.Expect(indexPodFleet(&corev1.Pod{ObjectMeta: meta(map[string]string{desired.LabelManagedBy: desired.ManagedByValue})})).To(BeEmpty())
	g.Expect(indexSliceFleet(&discoveryv1.EndpointSlice{ObjectMeta: meta(map[string]string{discoveryv1.LabelServiceName: "a", desired.LabelManagedBy: desired.ManagedByValue})})).To(Equal([]string{"a"}))
	g.Expect(indexSliceFleet(&discoveryv1.EndpointSlice{ObjectMeta: meta(map[string]string{discoveryv1.LabelServiceName: "a"})})).To(BeEmpty(), "a stranger's Service's slice")
	g.Expect(indexSliceFleet(&discoveryv1.EndpointSlice{ObjectMeta: meta(map[string]string{desired.LabelInstance: "a", desired.LabelManagedBy: desired.ManagedByValue})})).To(BeEmpty())
}
