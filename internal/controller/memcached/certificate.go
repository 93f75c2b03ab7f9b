package memcached

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// certRecheck is how soon a fleet whose Certificate is not Ready yet is
// looked at again when nothing watches Certificates: issuing by a CA or
// self-signed issuer takes seconds.
const certRecheck = 5 * time.Second

// certState is what the Certificate phase found.
type certState struct {
	wanted, apiMissing, removed bool
	// ready is the Certificate's Ready condition; message its message, or
	// why there is none yet.
	ready   bool
	message string
}

// TLSSecretName is the Secret cert-manager writes the fleet's certificate
// to, and the pods mount.
func TLSSecretName(instance string) string { return instance + "-tls" }

// reconcileCertificate keeps the fleet's Certificate equal to its spec and
// reads whether it is Ready, which the Deployment phase needs: it runs
// before the owned phases. A fleet that never enabled TLS costs nothing.
func (r *Reconciler) reconcileCertificate(ctx context.Context, s *scope) error {
	wanted := policy.TLSEnabled(s.spec)
	kind := optionalKind{gvk: CertificateGVK, memo: &r.certified, condition: cachev1alpha1.ConditionCertificateReady}
	outcome, live, err := r.reconcileOptional(ctx, s, kind, wanted, func() *unstructured.Unstructured {
		return BuildCertificate(s.memcached, s.spec)
	})
	if err != nil || outcome == optionalNone {
		return err
	}
	s.tls = &certState{wanted: wanted}
	switch outcome {
	case optionalAPIMissing:
		s.tls.apiMissing = true
	case optionalRemoved:
		s.tls.removed = true
	case optionalUnchanged:
		s.tls.ready, s.tls.message = CertificateReady(live)
	case optionalCreated:
		s.tls.message = "the Certificate was just created; cert-manager has not issued it yet"
	case optionalUpdated:
		// A changed spec (another issuer, other names) is reissued: the
		// Ready condition read before the apply speaks of the old one.
		s.tls.message = "the Certificate's spec changed; cert-manager has not reissued it yet"
	}
	return nil
}

// CertificateReady reads a Certificate's Ready condition, for a spec it has
// observed: cert-manager sets Ready for the generation it last looked at.
func CertificateReady(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		msg, _ := m["message"].(string)
		if g, ok := m["observedGeneration"].(int64); ok && g < u.GetGeneration() {
			return false, "cert-manager has not yet observed the Certificate's current spec"
		}
		return m["status"] == string(metav1.ConditionTrue), msg
	}
	return false, "cert-manager has not reported on the Certificate yet"
}

// tlsDNSNames are the names clients reach the fleet by, and verify the
// certificate against: the headless Service's name in its short, namespaced
// and cluster forms (clients that resolve it to pod IPs and connect to one
// of them verify against the name they resolved), and a wildcard over its
// per-pod records, for clients that address one pod by name.
func tlsDNSNames(name, namespace string) []any {
	svc := name + "." + namespace + ".svc"
	return []any{name, name + "." + namespace, svc, svc + ".cluster.local", "*." + svc, "*." + svc + ".cluster.local"}
}

// BuildCertificate is the fleet's cert-manager Certificate: signed by the
// issuer spec.tls names, for the Service's names, into the Secret the pods
// mount. The key is ECDSA P-256 (cheap handshakes) and rotated on every
// renewal, so a leaked key ages out with its certificate.
func BuildCertificate(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *unstructured.Unstructured {
	ref := spec.TLS.IssuerRef
	labels := map[string]any{}
	for k, v := range objectLabels(mc.Name) {
		labels[k] = v
	}
	return optionalObject(mc, CertificateGVK, labels, map[string]any{
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

// certAPIMissingMessage is CertificateReady's message when cert-manager's
// API is not served.
const certAPIMissingMessage = "the cluster does not serve cert-manager.io/v1 Certificate: install cert-manager and the operator creates it; until then the Deployment is left as it is"
