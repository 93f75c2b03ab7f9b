// Package metricsauth guards the operator's metrics endpoint the way the
// Kubernetes API guards its own: a bearer token is checked with a
// TokenReview, and the user it names with a SubjectAccessReview for the
// request's verb on its path (a nonResourceURL rule such as get /metrics).
//
// It replaces controller-runtime's filters.WithAuthenticationAndAuthorization,
// which makes the same two reviews through k8s.io/apiserver's delegating
// authenticator and authorizer; those bring the apiserver's CEL, tracing,
// gRPC and informer packages into the binary, and that code is most of what
// the operator keeps resident that does not grow with fleets.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long answers are kept: a scraper asks every 15 to 60 seconds, and
// each answer would otherwise cost two API requests. These are the TTLs of
// the delegating authenticator and authorizer this replaces.
const (
	authnTTL      = time.Minute
	allowTTL      = 5 * time.Minute
	denyTTL       = 30 * time.Second
	reviewTimeout = 10 * time.Second
	// maxEntries bounds each cache: a flood of random tokens costs requests,
	// never memory.
	maxEntries = 1024
)

// Filter is a metricsserver.FilterProvider.
func Filter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	g := &guard{tokens: authn.TokenReviews(), access: authz.SubjectAccessReviews(), now: time.Now}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { g.serve(log, next, w, req) }), nil
	}, nil
}

type tokenReviews interface {
	Create(context.Context, *authenticationv1.TokenReview, metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

type accessReviews interface {
	Create(context.Context, *authorizationv1.SubjectAccessReview, metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

type guard struct {
	tokens tokenReviews
	access accessReviews
	now    func() time.Time

	users ttlCache[*authenticationv1.UserInfo]
	rules ttlCache[bool]
}

func (g *guard) serve(log logr.Logger, next http.Handler, w http.ResponseWriter, req *http.Request) {
	token, ok := bearer(req)
	if !ok {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	user, err := g.authenticate(req.Context(), token)
	if err != nil {
		log.Error(err, "Authentication failed")
		http.Error(w, "Authentication failed", http.StatusInternalServerError)
		return
	}
	if user == nil {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	verb := strings.ToLower(req.Method)
	allowed, err := g.authorize(req.Context(), user, verb, req.URL.Path)
	if err != nil {
		log.Error(err, "Authorization failed", "user", user.Username)
		http.Error(w, "Authorization for user "+user.Username+" failed", http.StatusInternalServerError)
		return
	}
	if !allowed {
		log.V(4).Info("Authorization denied", "user", user.Username, "verb", verb, "path", req.URL.Path)
		http.Error(w, "Authorization denied for user "+user.Username, http.StatusForbidden)
		return
	}
	next.ServeHTTP(w, req)
}

// bearer is the token of an "Authorization: Bearer" header.
func bearer(req *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}

// authenticate returns the user a token names, or nil when the API server
// does not accept it. Tokens are cached by their hash, never kept.
func (g *guard) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key, now := hashKey(token), g.now()
	if user, ok := g.users.get(key, now); ok {
		return user, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	res, err := g.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	var user *authenticationv1.UserInfo
	if res.Status.Authenticated && res.Status.Error == "" {
		user = res.Status.User.DeepCopy()
	}
	g.users.put(key, user, now.Add(authnTTL))
	return user, nil
}

// authorize asks whether user may use verb on the non-resource path.
func (g *guard) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	parts := []string{user.Username, user.UID, verb, path, strings.Join(user.Groups, ",")}
	for _, k := range slices.Sorted(maps.Keys(user.Extra)) {
		extra[k] = authorizationv1.ExtraValue(user.Extra[k])
		parts = append(parts, k+"="+strings.Join(user.Extra[k], ","))
	}
	key, now := hashKey(parts...), g.now()
	if allowed, ok := g.rules.get(key, now); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	res, err := g.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	allowed := res.Status.Allowed && !res.Status.Denied
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	g.rules.put(key, allowed, now.Add(ttl))
	return allowed, nil
}

// hashKey is a cache key that keeps no token or user name in memory.
func hashKey(parts ...string) string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join(parts, "\x00"))))
}

// ttlCache keeps answers until they expire, and at most maxEntries of them;
// scrapes come concurrently.
type ttlCache[V any] struct {
	mu sync.Mutex
	m  map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlCache[V]) put(key string, v V, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxEntries {
		// Dropping everything is rare (over a thousand live callers) and
		// costs only fresh reviews.
		c.m = map[string]ttlEntry[V]{}
	}
	c.m[key] = ttlEntry[V]{v: v, expires: expires}
}
