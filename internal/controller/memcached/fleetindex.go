package memcached

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The cache answers a label selector by walking every object of the
// namespace, so with a thousand fleets in one namespace each pass walked
// every pod and EndpointSlice there. These indexes key the fleet's own
// objects by its name, so a pass lists only them.
const (
	podFleetIndex   = "memcached.fleet.pods"
	sliceFleetIndex = "memcached.fleet.endpointslices"
)

// indexPodFleet is the podFleetIndex of a pod: the fleet that manages it.
func indexPodFleet(o client.Object) []string {
	l := o.GetLabels()
	if name := l[LabelInstance]; name != "" && l[LabelManagedBy] == ManagedByValue {
		return []string{name}
	}
	return nil
}

// indexSliceFleet is the sliceFleetIndex of an EndpointSlice: the fleet
// whose Service it belongs to.
func indexSliceFleet(o client.Object) []string {
	l := o.GetLabels()
	if name := l[discoveryv1.LabelServiceName]; name != "" && l[LabelManagedBy] == ManagedByValue {
		return []string{name}
	}
	return nil
}
