package webhookcert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// FieldOwner is the field manager of every write, so managedFields show
// that the Secret's data and the caBundles are the operator's.
const FieldOwner = "memcached-operator-webhookcert"

// Options name what the Rotator keeps.
type Options struct {
	// Namespace and SecretName locate the Secret with the CA and the serving
	// certificate.
	Namespace, SecretName string
	// MutatingWebhookConfiguration and ValidatingWebhookConfiguration are the
	// configurations whose every webhook must trust the CA.
	MutatingWebhookConfiguration, ValidatingWebhookConfiguration string
	// CAName is the CA's common name.
	CAName string
	// Policy is what a good certificate is.
	Policy Policy
	// ResyncInterval is the longest time between two passes; the Secret and
	// the configurations are also watched, and a renewal due sooner wakes it.
	ResyncInterval time.Duration
	// TrustPropagation is how long a replica keeps serving its certificate
	// after a certificate from a new CA appears and that CA is published:
	// the API server reads webhook configurations through an informer, so it
	// trusts a new caBundle a moment after the write. Default 5s.
	TrustPropagation time.Duration
}

// Rotator keeps the Secret and the caBundles right and serves the Secret's
// certificate. It is a manager Runnable that runs on every replica.
type Rotator struct {
	opts   Options
	client client.WithWatch
	served atomic.Pointer[tls.Certificate]
	// trustedSince is when this replica first saw the CA (by key ID) of a
	// certificate it is about to serve published; only Start's passes and
	// tests calling Sync touch it, never at once.
	trustedSince map[string]time.Time
	mu           sync.Mutex
	gate         trustGate
	log          logr.Logger
	now          func() time.Time
}

// New returns a Rotator talking to the API server directly: it reads one
// Secret and two configurations, which no cache needs to hold.
func New(cfg *rest.Config, opts Options) (*Rotator, error) {
	if opts.Namespace == "" || opts.SecretName == "" || opts.MutatingWebhookConfiguration == "" || opts.ValidatingWebhookConfiguration == "" {
		return nil, errors.New("webhookcert: namespace, secret and both webhook configuration names are required")
	}
	if len(opts.Policy.DNSNames) == 0 {
		return nil, errors.New("webhookcert: no DNS names for the serving certificate")
	}
	if opts.Policy.ServingValidity <= 0 || opts.Policy.ServingValidity > opts.Policy.CAValidity {
		return nil, errors.New("webhookcert: the serving validity must be positive and at most the CA's")
	}
	if opts.Policy.RenewFraction <= 0 || opts.Policy.RenewFraction >= 1 {
		return nil, errors.New("webhookcert: the renew fraction must be between 0 and 1")
	}
	if opts.ResyncInterval <= 0 {
		opts.ResyncInterval = time.Hour
	}
	if opts.TrustPropagation <= 0 {
		opts.TrustPropagation = 5 * time.Second
	}
	c, err := client.NewWithWatch(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("webhookcert: %w", err)
	}
	return &Rotator{opts: opts, client: c, log: logf.Log.WithName("webhookcert"), now: time.Now, trustedSince: map[string]time.Time{}}, nil
}

// NeedLeaderElection is false: every replica serves webhooks, so every
// replica must load the certificate, and the writes are safe to race.
func (r *Rotator) NeedLeaderElection() bool { return false }

// GetCertificate is the webhook server's tls.Config.GetCertificate. Serving
// from memory needs no writable folder and lets readiness know exactly
// which certificate is served.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.served.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("webhookcert: no serving certificate loaded yet")
}

// errRace is a write that lost to another replica's: the next pass starts
// at once from what won.
var errRace = errors.New("another replica wrote first")

// Start runs passes until ctx ends: at once, when the Secret or a
// configuration changes, when a certificate falls due, and every
// ResyncInterval.
func (r *Rotator) Start(ctx context.Context) error {
	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	go r.watch(ctx, &corev1.SecretList{}, poke, client.InNamespace(r.opts.Namespace), client.MatchingFields{"metadata.name": r.opts.SecretName})
	go r.watch(ctx, &admissionregistrationv1.MutatingWebhookConfigurationList{}, poke, client.MatchingFields{"metadata.name": r.opts.MutatingWebhookConfiguration})
	go r.watch(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{}, poke, client.MatchingFields{"metadata.name": r.opts.ValidatingWebhookConfiguration})

	backoff := time.Duration(0)
	for {
		next, err := r.Sync(ctx)
		wait := r.opts.ResyncInterval
		if !next.IsZero() {
			wait = max(0, min(wait, next.Sub(r.now())))
		}
		switch {
		case errors.Is(err, errRace):
			wait = 0
		case err != nil:
			backoff = min(max(2*backoff, 500*time.Millisecond), 30*time.Second)
			wait = backoff
			r.log.Error(err, "Webhook certificate pass failed", "retryIn", wait)
		default:
			backoff = 0
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-trigger:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// watch pokes on every event of the one object opts select; the API server
// authorizes a watch with a metadata.name field selector against RBAC
// resourceNames, so no broader grant is needed.
func (r *Rotator) watch(ctx context.Context, list client.ObjectList, poke func(), opts ...client.ListOption) {
	delay := time.Second
	for ctx.Err() == nil {
		w, err := r.client.Watch(ctx, list, opts...)
		if err != nil {
			r.log.Error(err, "Watch failed", "kind", fmt.Sprintf("%T", list))
		} else {
			delay = time.Second
			r.drain(ctx, w, poke)
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Minute)
	}
}

func (r *Rotator) drain(ctx context.Context, w watch.Interface, poke func()) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			poke()
		}
	}
}

// Sync is one pass: renew the Secret if it needs it, make every webhook
// trust the Secret's CA, then serve the Secret's certificate (a replica
// already serving switches to one from a new CA only once that CA had time
// to reach the API server). A pass
// with nothing to change only reads. It returns when the next renewal is due.
func (r *Rotator) Sync(ctx context.Context) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: r.opts.Namespace, Name: r.opts.SecretName}
	err := r.client.Get(ctx, key, secret)
	exists := err == nil
	if apierrors.IsNotFound(err) {
		secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: corev1.SecretTypeOpaque}
	} else if err != nil {
		return time.Time{}, fmt.Errorf("reading Secret %s: %w", key, err)
	}

	if d := Decide(secret.Data, now, r.opts.Policy); d.Action != Keep {
		data, err := Renew(secret.Data, d, now, r.opts.Policy, r.opts.CAName)
		if err != nil {
			return time.Time{}, err
		}
		// The Secret write decides whose new CA wins, and only the winner's is
		// published (below): a replica that loses has published nothing, so
		// no CA whose key was never stored reaches the caBundles, where the
		// union with what is published would keep it until it expires.
		// Publishing after storing is safe because a replica already serving
		// switches to a certificate from a new CA only TrustPropagation after
		// it saw that CA published (serve).
		secret.Data = data
		if exists {
			err = r.client.Update(ctx, secret, client.FieldOwner(FieldOwner))
		} else {
			err = r.client.Create(ctx, secret, client.FieldOwner(FieldOwner))
		}
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			return time.Time{}, errRace
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("writing Secret %s: %w", key, err)
		}
		r.log.Info("Webhook certificate renewed", "action", d.Action.String(), "reason", d.Reason)
	}

	// The Secret is good now; a CA written by something else is published
	// here before its certificate is served.
	pubErr := r.publish(ctx, ParseBundle(secret.Data[CACertKey]), now)
	next := NextCheck(secret.Data, r.opts.Policy)
	switchAt, err := r.serve(secret.Data, pubErr == nil, now)
	if err != nil {
		return time.Time{}, err
	}
	if !switchAt.IsZero() && (next.IsZero() || switchAt.Before(next)) {
		next = switchAt
	}
	return next, pubErr
}

// serve loads the Secret's certificate. One from the CA already served is
// loaded at once; one from a new CA only TrustPropagation after this replica
// saw that CA published, so the API server trusts it before it is served.
// It returns when to try again if it waits.
func (r *Rotator) serve(data map[string][]byte, published bool, now time.Time) (time.Time, error) {
	current := r.served.Load()
	if current != nil && bytes.Equal(current.Certificate[0], firstDER(data[TLSCertKey])) {
		return time.Time{}, nil
	}
	c, err := tls.X509KeyPair(data[TLSCertKey], data[TLSKeyKey])
	if err != nil {
		return time.Time{}, fmt.Errorf("loading serving certificate: %w", err)
	}
	if current != nil && !bytes.Equal(current.Leaf.AuthorityKeyId, c.Leaf.AuthorityKeyId) {
		ca := string(c.Leaf.AuthorityKeyId)
		since, seen := r.trustedSince[ca]
		if !seen {
			if !published {
				return time.Time{}, nil
			}
			since = now
			r.trustedSince[ca] = now
		}
		if at := since.Add(r.opts.TrustPropagation); now.Before(at) {
			return at, nil
		}
	}
	r.served.Store(&c)
	clear(r.trustedSince)
	r.log.Info("Serving webhook certificate", "notAfter", c.Leaf.NotAfter, "issuer", c.Leaf.Issuer.CommonName)
	return time.Time{}, nil
}

func firstDER(certPEM []byte) []byte {
	if certs := ParseBundle(certPEM); len(certs) > 0 {
		return certs[0].Raw
	}
	return nil
}

// configs are the two webhook configurations as JSON-patchable documents.
type config struct {
	obj     client.Object
	bundles [][]byte
	names   []string
}

func (r *Rotator) configs(ctx context.Context) ([]config, error) {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: r.opts.MutatingWebhookConfiguration}, m); err != nil {
		return nil, fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", r.opts.MutatingWebhookConfiguration, err)
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: r.opts.ValidatingWebhookConfiguration}, v); err != nil {
		return nil, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", r.opts.ValidatingWebhookConfiguration, err)
	}
	mc, vc := config{obj: m}, config{obj: v}
	for _, w := range m.Webhooks {
		mc.bundles, mc.names = append(mc.bundles, w.ClientConfig.CABundle), append(mc.names, w.Name)
	}
	for _, w := range v.Webhooks {
		vc.bundles, vc.names = append(vc.bundles, w.ClientConfig.CABundle), append(vc.names, w.Name)
	}
	return []config{mc, vc}, nil
}

// publish makes every webhook's caBundle Bundle(keep, what both
// configurations trust now).
func (r *Rotator) publish(ctx context.Context, keep []*x509.Certificate, now time.Time) error {
	return r.patchBundles(ctx, func(published []*x509.Certificate) []*x509.Certificate {
		return Bundle(keep, published, now)
	})
}

// patchBundles sets every webhook's caBundle to bundle(what both
// configurations trust now). It patches only the caBundles, with a JSON
// patch that carries the read resourceVersion: a GitOps apply never
// mentions caBundle, so it neither removes it nor conflicts, and two
// replicas publishing at once cannot drop each other's CA.
func (r *Rotator) patchBundles(ctx context.Context, bundle func([]*x509.Certificate) []*x509.Certificate) error {
	cfgs, err := r.configs(ctx)
	if err != nil {
		return err
	}
	var published []*x509.Certificate
	for _, c := range cfgs {
		for _, b := range c.bundles {
			published = append(published, ParseBundle(b)...)
		}
	}
	want := EncodeBundle(bundle(published))
	if len(want) == 0 {
		return nil
	}
	for _, c := range cfgs {
		ops := []map[string]any{{"op": "replace", "path": "/metadata/resourceVersion", "value": c.obj.GetResourceVersion()}}
		for i, b := range c.bundles {
			if bytes.Equal(b, want) {
				continue
			}
			ops = append(ops,
				map[string]any{"op": "test", "path": fmt.Sprintf("/webhooks/%d/name", i), "value": c.names[i]},
				map[string]any{"op": "add", "path": fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), "value": want})
		}
		if len(ops) == 1 {
			continue
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return err
		}
		err = r.client.Patch(ctx, c.obj, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(FieldOwner))
		if apierrors.IsConflict(err) {
			return errRace
		}
		if err != nil {
			return fmt.Errorf("patching caBundle of %T %s: %w", c.obj, c.obj.GetName(), err)
		}
		r.log.Info("Webhook caBundle updated", "configuration", c.obj.GetName(), "cas", len(ParseBundle(want)))
	}
	return nil
}

// ReadyCheck is a healthz.Checker: ready once a certificate is served and
// every webhook of both configurations trusts it, so `helm install --wait`
// returns only when admission works.
func (r *Rotator) ReadyCheck(req *http.Request) error {
	c := r.served.Load()
	if c == nil {
		return errors.New("no serving certificate loaded yet")
	}
	return r.gate.check(req.Context(), r.client, r.client, r.opts.MutatingWebhookConfiguration, r.opts.ValidatingWebhookConfiguration, c.Leaf)
}

// ErrNotTrusted is checkTrusted's answer when a webhook's caBundle holds no
// CA of the served certificate.
var ErrNotTrusted = errors.New("does not trust the served certificate yet")

// checkTrusted reads both configurations and fails unless every webhook has
// a caBundle holding a CA that signed leaf; it returns them as read.
func checkTrusted(ctx context.Context, c client.Reader, mutating, validating string, leaf *x509.Certificate) ([]client.Object, error) {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: mutating}, m); err != nil {
		return nil, err
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: validating}, v); err != nil {
		return nil, err
	}
	for _, w := range m.Webhooks {
		if !Trusts(ParseBundle(w.ClientConfig.CABundle), leaf) {
			return nil, fmt.Errorf("webhook %s %w", w.Name, ErrNotTrusted)
		}
	}
	for _, w := range v.Webhooks {
		if !Trusts(ParseBundle(w.ClientConfig.CABundle), leaf) {
			return nil, fmt.Errorf("webhook %s %w", w.Name, ErrNotTrusted)
		}
	}
	return []client.Object{m, v}, nil
}

// BundleSeenAnnotation holds, on each webhook configuration, a digest of the
// caBundles the operator last saw trusting its certificate. Writing it makes
// one more update after the caBundle's own: the API server caches each
// configuration's webhooks, and a request evaluated while an update arrives
// can leave the version before that update cached until the next one, so
// the caBundle's update alone may never be used.
const BundleSeenAnnotation = "cache.example.com/webhook-ca-bundle-digest"

// BundleDigest is the value of BundleSeenAnnotation for a configuration.
func BundleDigest(obj client.Object) string {
	h := sha256.New()
	add := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint64(len(b)))
		h.Write(b)
	}
	switch c := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			add(w.ClientConfig.CABundle)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range c.Webhooks {
			add(w.ClientConfig.CABundle)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// markSeen writes BundleSeenAnnotation on every configuration whose value
// is not the digest of its caBundles; a configuration already marked costs
// no write, so a restart writes nothing.
func markSeen(ctx context.Context, w client.Writer, cfgs []client.Object) error {
	for _, obj := range cfgs {
		digest := BundleDigest(obj)
		if obj.GetAnnotations()[BundleSeenAnnotation] == digest {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{BundleSeenAnnotation: digest}}})
		if err != nil {
			return err
		}
		if err := w.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldOwner)); err != nil {
			return fmt.Errorf("marking the caBundle of %T %s seen: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// trustGate is checkTrusted for a readiness probe. Once both configurations
// were seen to trust a certificate, a probe that cannot read them keeps
// that verdict for the same certificate: an API server that cannot be read
// sends no admission requests either, and turning every replica unready in
// a brownout would only empty the webhook Service when it comes back. What
// does turn the pod unready is an answer: a configuration that is gone, or
// one that does not trust the certificate served now. A verdict also needs
// both configurations marked with BundleSeenAnnotation; a failed mark is
// kept like a failed read.
type trustGate struct {
	mu      sync.Mutex
	trusted []byte
}

func (g *trustGate) check(ctx context.Context, c client.Reader, w client.Writer, mutating, validating string, leaf *x509.Certificate) error {
	cfgs, err := checkTrusted(ctx, c, mutating, validating, leaf)
	if err == nil {
		err = markSeen(ctx, w, cfgs)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case err == nil:
		g.trusted = leaf.Raw
	case errors.Is(err, ErrNotTrusted), apierrors.IsNotFound(err):
		g.trusted = nil
	case bytes.Equal(g.trusted, leaf.Raw):
		return nil
	}
	return err
}

// FileReadyCheck is the same readiness for a certificate that comes from
// files (cert-manager's Secret mounted in the pod): ready once every webhook
// of both configurations trusts the tls.crt in certDir and is marked seen,
// which closes the window where cainjector has not injected the CA yet.
func FileReadyCheck(c client.Reader, w client.Writer, certDir, mutating, validating string) func(*http.Request) error {
	gate := &trustGate{}
	return func(req *http.Request) error {
		data, err := os.ReadFile(filepath.Join(certDir, TLSCertKey))
		if err != nil {
			return err
		}
		certs := ParseBundle(data)
		if len(certs) == 0 {
			return fmt.Errorf("no certificate in %s", filepath.Join(certDir, TLSCertKey))
		}
		return gate.check(req.Context(), c, w, mutating, validating, certs[0])
	}
}
