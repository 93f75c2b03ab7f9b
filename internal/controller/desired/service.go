package desired

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/exporter"
	"github.com/example/memcached-operator/internal/policy"
)

// Service is the fleet's headless Service: clients that hash keys over
// servers need every pod's own address, not one virtual IP that spreads a
// key's requests over every pod. Its DNS name, <name>.<namespace>.svc,
// resolves to the address of each ready pod (A/AAAA records), and its SRV
// record _memcached._tcp.<name>.<namespace>.svc adds the port.
func Service(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *corev1ac.ServiceApplyConfiguration {
	svc := corev1ac.ServiceSpec().
		WithClusterIP(corev1.ClusterIPNone).
		WithSelector(selectorLabels(mc.Name)).
		WithPorts(corev1ac.ServicePort().
			WithName(portName).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(*spec.Port).
			WithTargetPort(intstr.FromString(portName)))
	if policy.TLSEnabled(spec) && spec.TLS.PlaintextPort != nil {
		svc.WithPorts(corev1ac.ServicePort().
			WithName(plaintextPortName).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(*spec.TLS.PlaintextPort).
			WithTargetPort(intstr.FromString(plaintextPortName)))
	}
	if policy.ExporterEnabled(spec) {
		svc.WithPorts(corev1ac.ServicePort().
			WithName(metricsPortName).
			WithProtocol(corev1.ProtocolTCP).
			WithPort(exporter.DefaultPort).
			WithTargetPort(intstr.FromString(metricsPortName)))
	}
	out := corev1ac.Service(mc.Name, mc.Namespace).
		WithLabels(PodLabels(mc.Name, serviceLabels(spec))).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(svc)
	if spec.Service != nil && len(spec.Service.Annotations) > 0 {
		out.WithAnnotations(spec.Service.Annotations)
	}
	return out
}

func serviceLabels(spec *cachev1alpha1.MemcachedSpec) map[string]string {
	if spec.Service == nil {
		return nil
	}
	return spec.Service.Labels
}
