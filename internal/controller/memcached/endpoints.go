package memcached

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// observeEndpoints reads which pods serve from the Service's EndpointSlices:
// what clients resolving the Service get, kept by the EndpointSlice
// controller from pod readiness. Pending, unready and terminating pods are
// not among them.
func (r *Reconciler) observeEndpoints(ctx context.Context, s *scope) error {
	list := &discoveryv1.EndpointSliceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.memcached.Namespace), client.MatchingFields{sliceFleetIndex: s.memcached.Name}); err != nil {
		return fmt.Errorf("listing EndpointSlices of Memcached %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	s.nodes, s.nodesObserved = ReadyPods(list.Items), true
	return nil
}

// ReadyPods are the names of the pods that the slices list as ready, sorted
// and without duplicates (a dual-stack Service has a slice per IP family).
// A missing ready condition counts as ready, as the EndpointSlice API says.
func ReadyPods(items []discoveryv1.EndpointSlice) []string {
	var names []string
	for i := range items {
		for _, ep := range items[i].Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || !ptr.Deref(ep.Conditions.Ready, true) ||
				ptr.Deref(ep.Conditions.Terminating, false) {
				continue
			}
			names = append(names, ep.TargetRef.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// readinessOnly is the cache transform of EndpointSlices: what ReadyPods
// reads (each endpoint's pod and its ready and terminating conditions) and
// the labels that map and index a slice to its fleet. Addresses, ports,
// nodes, hints and the rest of the metadata are dropped, since the cache
// holds a slice per fleet (two for dual stack).
func readinessOnly(in any) (any, error) {
	s, ok := in.(*discoveryv1.EndpointSlice)
	if !ok {
		return in, nil
	}
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  cachedMeta(&s.ObjectMeta),
		AddressType: s.AddressType,
		Endpoints:   make([]discoveryv1.Endpoint, 0, len(s.Endpoints)),
	}
	for _, ep := range s.Endpoints {
		kept := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready, Terminating: ep.Conditions.Terminating}}
		if ep.TargetRef != nil {
			kept.TargetRef = &corev1.ObjectReference{Kind: ep.TargetRef.Kind, Name: ep.TargetRef.Name}
		}
		out.Endpoints = append(out.Endpoints, kept)
	}
	return out, nil
}

// readyPodsChanged passes the EndpointSlice events that can change
// status.nodes; address or port churn alone does not.
var readyPodsChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldSlice, ok1 := e.ObjectOld.(*discoveryv1.EndpointSlice)
		newSlice, ok2 := e.ObjectNew.(*discoveryv1.EndpointSlice)
		return !ok1 || !ok2 || !slices.Equal(ReadyPods([]discoveryv1.EndpointSlice{*oldSlice}), ReadyPods([]discoveryv1.EndpointSlice{*newSlice}))
	},
}

// sliceToMemcached maps a slice to the fleet whose Service it belongs to;
// the Service has the Memcached's name.
func sliceToMemcached(_ context.Context, o client.Object) []reconcile.Request {
	labels := o.GetLabels()
	name := labels[discoveryv1.LabelServiceName]
	if labels[LabelManagedBy] != ManagedByValue || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
