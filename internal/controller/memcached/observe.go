package memcached

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/status"
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
	s.nodes, s.nodesObserved = status.ReadyPods(list.Items), true
	if s.stable() {
		s.servers = desired.Servers(s.memcached, *s.spec.Port, s.nodes)
	}
	return nil
}

// observePods finds the fleet's pods that no node fits, so that a rollout
// waiting on them says why instead of only counting pods, and what the pods
// say of the auth Secret. The Deployment and its ReplicaSet report neither;
// the pods' PodScheduled condition and container states do.
func (r *Reconciler) observePods(ctx context.Context, s *scope) error {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.memcached.Namespace), client.MatchingFields{podFleetIndex: s.memcached.Name}); err != nil {
		return fmt.Errorf("listing pods of Memcached %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	s.unschedulable, s.unschedulableMsg = status.Unschedulable(list.Items)
	if s.spec.Auth != nil {
		s.auth = status.AuthFromPods(list.Items)
	}
	return nil
}
