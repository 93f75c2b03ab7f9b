package memcached

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/status"
)

// sliceFrom builds an EndpointSlice of the fleet "cache" from data, three
// bytes an endpoint: its conditions and reference kind, then a pod name.
func sliceFrom(data []byte) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "cache-x1", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "cache", desired.LabelManagedBy: desired.ManagedByValue,
				discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			},
			Annotations:     map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-02T00:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "cache"}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("memcached"), Port: ptr.To[int32](11211)}},
	}
	tristate := func(b byte) *bool {
		switch b % 3 {
		case 1:
			return ptr.To(true)
		case 2:
			return ptr.To(false)
		}
		return nil
	}
	for i := 0; i+2 < len(data); i += 3 {
		flags, kind, name := data[i], data[i+1], data[i+2]
		ep := discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.0.0.%d", name)},
			NodeName:   ptr.To(fmt.Sprintf("node-%d", name%7)),
			Conditions: discoveryv1.EndpointConditions{Ready: tristate(flags), Serving: tristate(flags / 3), Terminating: tristate(flags / 9)},
		}
		switch kind % 3 {
		case 1:
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("cache-%d", name%5), UID: "p"}
		case 2:
			ep.TargetRef = &corev1.ObjectReference{Kind: "Node", Name: fmt.Sprintf("cache-%d", name%5)}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// FuzzReadinessOnly: what the operator reads of a slice, and how its events
// are mapped, indexed and filtered, is the same for the cached slice as for
// the one the API server sent; addresses, ports and nodes are not kept.
func FuzzReadinessOnly(f *testing.F) {
	f.Add([]byte{1, 1, 0, 1, 1, 1, 1, 1, 2}, []byte{1, 1, 0, 2, 1, 1})
	f.Add([]byte{0, 1, 3, 10, 1, 4, 2, 0, 1}, []byte{})
	f.Add([]byte{1, 2, 0, 19, 1, 1}, []byte{1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		trim := func(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
			out, err := readinessOnly(s.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			return out.(*discoveryv1.EndpointSlice)
		}
		sa, sb := sliceFrom(a), sliceFrom(b)
		ta, tb := trim(sa), trim(sb)
		if got, want := status.ReadyPods([]discoveryv1.EndpointSlice{*ta, *tb}), status.ReadyPods([]discoveryv1.EndpointSlice{*sa, *sb}); !slices.Equal(got, want) {
			t.Fatalf("ReadyPods of the cached slices %v, of the sent ones %v", got, want)
		}
		if got, want := indexSliceFleet(ta), indexSliceFleet(sa); !slices.Equal(got, want) {
			t.Fatalf("index %v, want %v", got, want)
		}
		if got, want := sliceToMemcached(context.Background(), ta), sliceToMemcached(context.Background(), sa); !slices.Equal(got, want) {
			t.Fatalf("mapped to %v, want %v", got, want)
		}
		if got, want := readyPodsChanged.Update(event.UpdateEvent{ObjectOld: ta, ObjectNew: tb}),
			readyPodsChanged.Update(event.UpdateEvent{ObjectOld: sa, ObjectNew: sb}); got != want {
			t.Fatalf("update passed %v, want %v", got, want)
		}
		if ta.Name != sa.Name || ta.Namespace != sa.Namespace || ta.UID != sa.UID || ta.ResourceVersion != sa.ResourceVersion {
			t.Fatalf("identity not kept: %+v", ta.ObjectMeta)
		}
		if len(ta.Ports) > 0 || len(ta.Annotations) > 0 || len(ta.OwnerReferences) > 0 {
			t.Fatalf("ports or metadata kept: %+v", ta)
		}
		for _, ep := range ta.Endpoints {
			if len(ep.Addresses) > 0 || ep.NodeName != nil || ep.Conditions.Serving != nil || (ep.TargetRef != nil && ep.TargetRef.UID != "") {
				t.Fatalf("endpoint keeps more than it needs: %+v", ep)
			}
		}
	})
}
