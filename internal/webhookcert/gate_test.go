package webhookcert

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// gatePKI is a CA, a serving certificate it signed, and another CA.
func gatePKI(g Gomega) (ca, serving, other *keyPair) {
	now := time.Now()
	ca, err := newCA("ca", now, 24*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	serving, err = newServing(ca, []string{"svc.ns.svc"}, now, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	other, err = newCA("other", now, 24*time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	return ca, serving, other
}

// fileProbe is FileReadyCheck of configurations m and v for serving's
// certificate in a new folder, as one probe.
func fileProbe(t *testing.T, c client.Client, serving *keyPair) (probe func() error, dir string) {
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, TLSCertKey), serving.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ready := FileReadyCheck(c, c, dir, "m", "v")
	return func() error { return ready(httptest.NewRequest("GET", "/readyz", nil)) }, dir
}

// TestReadinessOutlivesAnUnreadableAPIServer: once both configurations were
// seen to trust the served certificate, failing reads keep the pod ready;
// a configuration that does not trust the certificate (or is gone) turns
// it unready at once, and a new certificate must be seen trusted first.
func TestReadinessOutlivesAnUnreadableAPIServer(t *testing.T) {
	g := NewWithT(t)
	ca, serving, other := gatePKI(g)

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

	probe, dir := fileProbe(t, c, serving)

	down = true
	g.Expect(probe()).To(HaveOccurred(), "never seen trusted: not ready")
	down = false
	g.Expect(probe()).To(Succeed())
	down = true
	g.Expect(probe()).To(Succeed(), "seen trusted, then unreadable: stays ready")
	down = false

	setBundle := func(pem []byte) {
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(vwc), vwc)).To(Succeed())
		vwc.Webhooks[0].ClientConfig.CABundle = pem
		g.Expect(c.Update(context.Background(), vwc)).To(Succeed())
	}
	setBundle(other.CertPEM)
	g.Expect(errors.Is(probe(), ErrNotTrusted)).To(BeTrue(), "a configuration that does not trust it: unready at once")
	down = true
	g.Expect(probe()).To(HaveOccurred(), "the verdict was withdrawn")
	down = false

	setBundle(ca.CertPEM)
	g.Expect(probe()).To(Succeed())
	g.Expect(c.Delete(context.Background(), mwc)).To(Succeed())
	g.Expect(apierrors.IsNotFound(probe())).To(BeTrue(), "a configuration that is gone: unready")

	g.Expect(c.Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.x", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca.CertPEM}}}})).To(Succeed())
	g.Expect(probe()).To(Succeed())
	renewed, err := newServing(ca, []string{"svc.ns.svc"}, time.Now(), time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, TLSCertKey), renewed.CertPEM, 0o600)).To(Succeed())
	down = true
	g.Expect(probe()).To(MatchError(apierrors.NewServiceUnavailable("the API server is down")), "a new certificate is not covered by the old verdict")
}

// TestReadinessMarksEachNewBundleOnce: the first probe that finds both
// configurations trusting the certificate writes BundleSeenAnnotation on
// each, after their caBundle's update; later probes write nothing until a
// caBundle changes, and a probe whose mark fails is not ready.
func TestReadinessMarksEachNewBundleOnce(t *testing.T) {
	g := NewWithT(t)
	ca, serving, next := gatePKI(g)

	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.x"}}}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.x"}, {Name: "v.y"}}}
	var patches []string
	var refuse bool
	c := fakeAPI(g, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if refuse {
				return apierrors.NewForbidden(admissionregistrationv1.Resource("validatingwebhookconfigurations"), obj.GetName(), errors.New("no patch"))
			}
			patches = append(patches, obj.GetName())
			return c.Patch(ctx, obj, patch, opts...)
		},
	}, mwc, vwc)
	probe, _ := fileProbe(t, c, serving)
	inject := func(pem []byte) { // what cainjector does
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mwc), mwc)).To(Succeed())
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(vwc), vwc)).To(Succeed())
		mwc.Webhooks[0].ClientConfig.CABundle = pem
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].ClientConfig.CABundle = pem
		}
		g.Expect(c.Update(context.Background(), mwc)).To(Succeed())
		g.Expect(c.Update(context.Background(), vwc)).To(Succeed())
	}
	marks := func() []string {
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mwc), mwc)).To(Succeed())
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(vwc), vwc)).To(Succeed())
		return []string{mwc.Annotations[BundleSeenAnnotation], vwc.Annotations[BundleSeenAnnotation]}
	}

	g.Expect(errors.Is(probe(), ErrNotTrusted)).To(BeTrue())
	g.Expect(patches).To(BeEmpty(), "nothing marked before the CA is injected")

	inject(ca.CertPEM)
	refuse = true
	g.Expect(probe()).To(MatchError(ContainSubstring("no patch")), "trusted but not marked: not ready")
	refuse = false
	g.Expect(probe()).To(Succeed())
	g.Expect(patches).To(Equal([]string{"m", "v"}))
	g.Expect(marks()).To(Equal([]string{BundleDigest(mwc), BundleDigest(vwc)}))
	g.Expect(BundleDigest(mwc)).NotTo(Equal(BundleDigest(vwc)), "the digest covers every webhook's caBundle")

	for range 3 {
		g.Expect(probe()).To(Succeed())
	}
	g.Expect(patches).To(HaveLen(2), "a marked bundle costs no write")
	restarted, _ := fileProbe(t, c, serving)
	g.Expect(restarted()).To(Succeed())
	g.Expect(patches).To(HaveLen(2), "nor does a restart")

	inject(append(slices.Clone(ca.CertPEM), next.CertPEM...))
	g.Expect(probe()).To(Succeed())
	g.Expect(patches).To(Equal([]string{"m", "v", "m", "v"}), "a new caBundle is marked again")
	g.Expect(marks()).To(Equal([]string{BundleDigest(mwc), BundleDigest(vwc)}))
}
