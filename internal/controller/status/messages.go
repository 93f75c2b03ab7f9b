package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// authMissingMessage tells the user what the pods said and what to do.
func authMissingMessage(spec *cachev1alpha1.MemcachedSpec, a *AuthObservation) string {
	return "the kubelet cannot start memcached in " + a.Message + ": create Secret " + spec.Auth.SecretRef.Name +
		" with the auth file under key " + ptr.Deref(spec.Auth.SecretRef.Key, policy.DefaultAuthSecretKey) + "; pods that already serve keep serving"
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

// certAPIMissingMessage is CertificateReady's message when cert-manager's
// API is not served.
const certAPIMissingMessage = "the cluster does not serve cert-manager.io/v1 Certificate: install cert-manager and the operator creates it; until then the Deployment is left as it is"
