package webhookcert

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestReadinessOutlivesAnUnreadableAPIServer: once both configurations were
// seen to trust the served certificate, failing reads keep the pod ready;
// a configuration that does not trust the certificate (or is gone) turns
// it unready at once, and a new certificate must be seen trusted first.
func TestReadinessOutlivesAnUnreadableAPIServer(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	ca, err := newCA("ca", now, 24*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	serving, err := newServing(ca, []string{"svc.ns.svc"}, now, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	other, err := newCA("other", now, 24*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())

	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.x", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca.CertPEM}}}}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.x", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca.CertPEM}}}}
	var down bool
	c := fakeAPI(g, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if down {
				return apierrors.NewServiceUnavailable("the API server is down")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}, mwc, vwc)

	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, TLSCertKey), serving.CertPEM, 0o600)).To(Succeed())
	ready := FileReadyCheck(c, dir, "m", "v")
	probe := func() error { return ready(httptest.NewRequest("GET", "/readyz", nil)) }

	down = true
	g.Expect(probe()).To(HaveOccurred(), "never seen trusted: not ready")
	down = false
	g.Expect(probe()).To(Succeed())
	down = true
	g.Expect(probe()).To(Succeed(), "seen trusted, then unreadable: stays ready")
	down = false

	vwc.Webhooks[0].ClientConfig.CABundle = other.CertPEM
	g.Expect(c.Update(context.Background(), vwc)).To(Succeed())
	g.Expect(errors.Is(probe(), ErrNotTrusted)).To(BeTrue(), "a configuration that does not trust it: unready at once")
	down = true
	g.Expect(probe()).To(HaveOccurred(), "the verdict was withdrawn")
	down = false

	vwc.Webhooks[0].ClientConfig.CABundle = ca.CertPEM
	g.Expect(c.Update(context.Background(), vwc)).To(Succeed())
	g.Expect(probe()).To(Succeed())
	g.Expect(c.Delete(context.Background(), mwc)).To(Succeed())
	g.Expect(apierrors.IsNotFound(probe())).To(BeTrue(), "a configuration that is gone: unready")

	g.Expect(c.Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.x", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca.CertPEM}}}})).To(Succeed())
	g.Expect(probe()).To(Succeed())
	renewed, err := newServing(ca, []string{"svc.ns.svc"}, now, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, TLSCertKey), renewed.CertPEM, 0o600)).To(Succeed())
	down = true
	g.Expect(probe()).To(MatchError(apierrors.NewServiceUnavailable("the API server is down")), "a new certificate is not covered by the old verdict")
}
