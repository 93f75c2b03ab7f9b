package memcached

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/status"
	"github.com/example/memcached-operator/internal/policy"
)

// certRecheck is how soon a fleet whose Certificate is not Ready yet is
// looked at again when nothing watches Certificates: issuing by a CA or
// self-signed issuer takes seconds.
const certRecheck = 5 * time.Second

// reconcileCertificate keeps the fleet's Certificate equal to its spec and
// reads whether it is Ready, which the Deployment phase needs: it runs
// before the owned phases. A fleet that never enabled TLS costs nothing.
func (r *Reconciler) reconcileCertificate(ctx context.Context, s *scope) error {
	wanted := policy.TLSEnabled(s.spec)
	kind := apply.OptionalKind{GVK: desired.CertificateGVK, Condition: cachev1alpha1.ConditionCertificateReady}
	outcome, live, err := r.applier().Optional(ctx, s.memcached, kind, wanted, func() *unstructured.Unstructured {
		return desired.Certificate(s.memcached, s.spec)
	})
	if err != nil || outcome == apply.None {
		return err
	}
	s.tls = &status.CertificateObservation{Wanted: wanted}
	switch outcome {
	case apply.APIMissing:
		s.tls.APIMissing = true
	case apply.Removed:
		s.tls.Removed = true
	case apply.Unchanged:
		s.tls.Ready, s.tls.Message = status.CertificateReady(live)
	case apply.Created:
		s.markCreated(desired.CertificateGVK.Kind)
		s.tls.Message = "the Certificate was just created; cert-manager has not issued it yet"
	case apply.Updated:
		// A changed spec (another issuer, other names) is reissued: the
		// Ready condition read before the apply speaks of the old one.
		s.tls.Message = "the Certificate's spec changed; cert-manager has not reissued it yet"
	}
	return nil
}
