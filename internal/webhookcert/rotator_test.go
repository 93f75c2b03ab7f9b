package webhookcert

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// fakeAPI is an API server holding objs, with funcs intercepting its calls.
func fakeAPI(g Gomega, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	s := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(s)).To(Succeed())
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

func TestServeWaitsForANewCAToPropagate(t *testing.T) {
	g := NewWithT(t)
	r := &Rotator{opts: Options{TrustPropagation: 5 * time.Second}, trustedSince: map[string]time.Time{}, log: logr.Discard()}
	first := fresh(t, t0)
	at, err := r.serve(first, false, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at.IsZero()).To(BeTrue())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(first[TLSCertKey])[0].Raw), "nothing served yet: load at once")

	renewed, err := Renew(first, Decision{Action: RenewServing}, t0, policy, "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = r.serve(renewed, false, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(renewed[TLSCertKey])[0].Raw), "same CA: at once")

	newCA := fresh(t, t0)
	_, err = r.serve(newCA, false, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(renewed[TLSCertKey])[0].Raw), "new CA not published: keep serving")
	at, err = r.serve(newCA, true, t0.Add(time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at).To(Equal(t0.Add(6 * time.Second)))
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(renewed[TLSCertKey])[0].Raw), "published a moment ago: keep serving")
	_, err = r.serve(newCA, true, t0.Add(5*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(renewed[TLSCertKey])[0].Raw))
	_, err = r.serve(newCA, true, t0.Add(6*time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.served.Load().Leaf.Raw).To(Equal(ParseBundle(newCA[TLSCertKey])[0].Raw), "after TrustPropagation")
}

// Two replicas start on the chart's empty Secret and both mint a CA; the
// Secret write picks one. The loser must leave nothing behind: the bundle
// keeps every published CA (Bundle), so a CA the loser had published would
// stay in every caBundle until it expired, trusted though its key is gone.
// The other replica reacts to each of the loser's patches as its watch
// would, which is the interleaving that once kept a withdrawn CA.
func TestTheReplicaThatLosesTheFirstFillPublishesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opts := Options{Namespace: "ops", SecretName: "certs", MutatingWebhookConfiguration: "m", ValidatingWebhookConfiguration: "v", CAName: "ca", Policy: policy, TrustPropagation: 5 * time.Second}
	base := fakeAPI(g, interceptor.Funcs{},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "certs"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m1.example.com"}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "v"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v1.example.com"}, {Name: "v2.example.com"}}},
	)
	replica := func(c client.WithWatch) *Rotator {
		return &Rotator{opts: opts, client: c, log: logr.Discard(), now: func() time.Time { return t0 }, trustedSince: map[string]time.Time{}}
	}
	winner := replica(base)
	var loserPatches int
	loser := replica(interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if _, err := winner.Sync(ctx); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			loserPatches++
			err := c.Patch(ctx, obj, patch, opts...)
			_, _ = winner.Sync(ctx)
			return err
		},
	}))

	_, err := loser.Sync(ctx)
	g.Expect(err).To(MatchError(errRace), "the winner's Secret write came first")
	g.Expect(loserPatches).To(BeZero(), "the losing pass touched no caBundle")
	_, err = loser.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = winner.Sync(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	secret := &corev1.Secret{}
	g.Expect(base.Get(ctx, client.ObjectKey{Namespace: "ops", Name: "certs"}, secret)).To(Succeed())
	g.Expect(ParseBundle(secret.Data[CACertKey])).To(HaveLen(1))
	cfgs, err := winner.configs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range cfgs {
		for i, b := range c.bundles {
			g.Expect(b).To(Equal(secret.Data[CACertKey]), "%s webhook %d trusts the stored CA and nothing else", c.obj.GetName(), i)
		}
	}
	g.Expect(loser.served.Load().Certificate[0]).To(Equal(winner.served.Load().Certificate[0]), "both serve the stored certificate")
}
