package desired

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/exporter"
	"github.com/example/memcached-operator/internal/policy"
)

// NetworkPolicyEnabled tells whether the fleet asks for a NetworkPolicy.
func NetworkPolicyEnabled(spec *cachev1alpha1.MemcachedSpec) bool {
	return spec.NetworkPolicy != nil && ptr.Deref(spec.NetworkPolicy.Enabled, false)
}

// NetworkPolicy is the fleet's NetworkPolicy, or nil when it has none.
// It admits ingress to the memcached port from spec.networkPolicy.from and,
// with the exporter, to the metrics port from metricsFrom; each empty list
// means the fleet's own namespace. Every other port of the pods is closed
// to ingress; egress is not restricted (memcached opens no connections).
func NetworkPolicy(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *networkingv1ac.NetworkPolicyApplyConfiguration {
	if !NetworkPolicyEnabled(spec) {
		return nil
	}
	rule := func(port int32, peers []networkingv1.NetworkPolicyPeer) *networkingv1ac.NetworkPolicyIngressRuleApplyConfiguration {
		r := networkingv1ac.NetworkPolicyIngressRule().
			WithPorts(networkingv1ac.NetworkPolicyPort().WithProtocol(corev1.ProtocolTCP).WithPort(intstr.FromInt32(port)))
		if len(peers) == 0 {
			// An empty podSelector without a namespaceSelector selects the
			// pods of the policy's own namespace.
			return r.WithFrom(networkingv1ac.NetworkPolicyPeer().WithPodSelector(metav1ac.LabelSelector()))
		}
		for i := range peers {
			r.WithFrom(mustConvert[networkingv1ac.NetworkPolicyPeerApplyConfiguration](&peers[i]))
		}
		return r
	}
	npSpec := networkingv1ac.NetworkPolicySpec().
		WithPodSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc.Name))).
		WithPolicyTypes(networkingv1.PolicyTypeIngress).
		WithIngress(rule(*spec.Port, spec.NetworkPolicy.From))
	if policy.TLSEnabled(spec) && spec.TLS.PlaintextPort != nil {
		// The same clients, on the listener they asked for.
		npSpec.WithIngress(rule(*spec.TLS.PlaintextPort, spec.NetworkPolicy.From))
	}
	if policy.ExporterEnabled(spec) {
		npSpec.WithIngress(rule(exporter.DefaultPort, spec.NetworkPolicy.MetricsFrom))
	}
	return networkingv1ac.NetworkPolicy(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc.Name)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(npSpec)
}
