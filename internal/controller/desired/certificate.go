package desired

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// CertificateGVK is cert-manager's Certificate. Like the ServiceMonitor, the
// operator does not need its CRD to start: it asks the RESTMapper when a
// fleet turns TLS on, and reads the object live. When the CRD is served at
// start it also watches Certificates' metadata, so that cert-manager's
// status changes requeue the fleet; otherwise it looks again every
// Recheck.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// TLSSecretName is the Secret cert-manager writes the fleet's certificate
// to, and the pods mount.
func TLSSecretName(instance string) string { return instance + "-tls" }

// tlsDNSNames are the names clients reach the fleet by, and verify the
// certificate against: the headless Service's name in its short, namespaced
// and cluster forms (clients that resolve it to pod IPs and connect to one
// of them verify against the name they resolved), and a wildcard over its
// per-pod records, for clients that address one pod by name.
func tlsDNSNames(name, namespace string) []any {
	svc := name + "." + namespace + ".svc"
	return []any{name, name + "." + namespace, svc, svc + ".cluster.local", "*." + svc, "*." + svc + ".cluster.local"}
}

// Certificate is the fleet's cert-manager Certificate: signed by the
// issuer spec.tls names, for the Service's names, into the Secret the pods
// mount. The key is ECDSA P-256 (cheap handshakes) and rotated on every
// renewal, so a leaked key ages out with its certificate.
func Certificate(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *unstructured.Unstructured {
	ref := spec.TLS.IssuerRef
	labels := map[string]any{}
	for k, v := range objectLabels(mc.Name) {
		labels[k] = v
	}
	return ownedUnstructured(mc, CertificateGVK, labels, map[string]any{
		"secretName": TLSSecretName(mc.Name),
		// The Secret carries the fleet's labels, so that it is found with
		// the rest of the fleet's objects.
		"secretTemplate": map[string]any{"labels": labels},
		"commonName":     mc.Name + "." + mc.Namespace + ".svc",
		"dnsNames":       tlsDNSNames(mc.Name, mc.Namespace),
		// An ECDSA key signs the handshake; it enciphers nothing, so no key
		// encipherment. Server auth only: with a ClusterIssuer shared by
		// tenants, a fleet's certificate must log in to no other fleet that
		// requires client certificates of that CA.
		"usages":     []any{"server auth", "digital signature"},
		"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
		"issuerRef": map[string]any{
			"name": ref.Name, "kind": ptr.Deref(ref.Kind, policy.IssuerKind), "group": ptr.Deref(ref.Group, policy.CertManagerGroup),
		},
	})
}
