package metricsauth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// fakeAPI answers TokenReviews and SubjectAccessReviews as an API server
// would: "reader" may get /metrics, "stranger" is a user with no such rule,
// any other token is not a token. It counts the reviews it answers.
type fakeAPI struct {
	tokenReviews, accessReviews atomic.Int32
	down                        atomic.Bool
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.down.Load() {
		http.Error(w, "etcdserver: request timed out", http.StatusInternalServerError)
		return
	}
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/apis/authentication.k8s.io/v1/tokenreviews":
		f.tokenReviews.Add(1)
		var tr authenticationv1.TokenReview
		_ = json.Unmarshal(body, &tr)
		switch tr.Spec.Token {
		case "reader-token":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "system:serviceaccount:monitoring:prometheus", UID: "u1", Groups: []string{"system:serviceaccounts"},
				Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}}}
		case "stranger-token":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "stranger"}}
		default:
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		tr.APIVersion, tr.Kind = "authentication.k8s.io/v1", "TokenReview"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(tr)
	case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		f.accessReviews.Add(1)
		var sar authorizationv1.SubjectAccessReview
		_ = json.Unmarshal(body, &sar)
		a := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus" &&
			len(sar.Spec.Groups) == 1 && len(sar.Spec.Extra) == 1 && sar.Spec.UID == "u1" &&
			a != nil && a.Verb == "get" && a.Path == "/metrics"
		sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sar)
	default:
		http.NotFound(w, r)
	}
}

func newGuarded(t *testing.T) (*fakeAPI, *httptest.Server) {
	t.Helper()
	api := &fakeAPI{}
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)
	filter, err := Filter(&rest.Config{Host: apiSrv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}, apiSrv.Client())
	if err != nil {
		t.Fatal(err)
	}
	h, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "memcached_up 1\n") }))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return api, srv
}

// newClients are the review clients Filter makes, for a guard whose clock
// the test moves.
func newClients(t *testing.T, apiSrv *httptest.Server) (tokenReviews, accessReviews) {
	t.Helper()
	cfg := &rest.Config{Host: apiSrv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}}
	authn, err := authenticationclient.NewForConfigAndClient(cfg, apiSrv.Client())
	if err != nil {
		t.Fatal(err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, apiSrv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return authn.TokenReviews(), authz.SubjectAccessReviews()
}

func scrape(t *testing.T, url, method, auth string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), method, url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// TestOnlyAnAuthorizedTokenScrapes: the answers of the filter it replaces,
// for every kind of caller.
func TestOnlyAnAuthorizedTokenScrapes(t *testing.T) {
	_, srv := newGuarded(t)
	for _, c := range []struct {
		name, method, path, auth string
		want                     int
	}{
		{"authorized service account", http.MethodGet, "/metrics", "Bearer reader-token", http.StatusOK},
		{"scheme in any case", http.MethodGet, "/metrics", "bearer reader-token", http.StatusOK},
		{"no header", http.MethodGet, "/metrics", "", http.StatusUnauthorized},
		{"empty token", http.MethodGet, "/metrics", "Bearer ", http.StatusUnauthorized},
		{"basic auth", http.MethodGet, "/metrics", "Basic cmVhZGVyOnB3", http.StatusUnauthorized},
		{"token the API server rejects", http.MethodGet, "/metrics", "Bearer forged", http.StatusUnauthorized},
		{"user without the rule", http.MethodGet, "/metrics", "Bearer stranger-token", http.StatusForbidden},
		{"another verb", http.MethodPost, "/metrics", "Bearer reader-token", http.StatusForbidden},
		{"another path", http.MethodGet, "/debug/pprof/", "Bearer reader-token", http.StatusForbidden},
	} {
		if got := scrape(t, srv.URL+c.path, c.method, c.auth); got != c.want {
			t.Errorf("%s: %s %s gave %d, want %d", c.name, c.method, c.path, got, c.want)
		}
	}
}

// TestAnswersAreKeptThenAskedAgain: a scraper costs two reviews a TTL, not
// two per scrape; a refused caller is asked about again sooner than an
// allowed one; an unreachable API server is a 500, never a pass.
func TestAnswersAreKeptThenAskedAgain(t *testing.T) {
	api := &fakeAPI{}
	apiSrv := httptest.NewServer(api)
	defer apiSrv.Close()
	now := time.Unix(1_000_000, 0)
	authn, authz := newClients(t, apiSrv)
	g := &guard{tokens: authn, access: authz, now: func() time.Time { return now }}
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	do := func(token string) int {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		g.serve(logr.Discard(), ok, w, req)
		return w.Code
	}
	for range 10 {
		if code := do("reader-token"); code != http.StatusOK {
			t.Fatalf("scrape gave %d", code)
		}
	}
	if n, m := api.tokenReviews.Load(), api.accessReviews.Load(); n != 1 || m != 1 {
		t.Fatalf("10 scrapes cost %d TokenReviews and %d SubjectAccessReviews, want 1 and 1", n, m)
	}
	_ = do("stranger-token")
	now = now.Add(denyTTL)
	_ = do("stranger-token")
	if m := api.accessReviews.Load(); m != 3 {
		t.Fatalf("a refusal is asked again after %s: %d reviews, want 3", denyTTL, m)
	}
	now = now.Add(authnTTL)
	_ = do("reader-token")
	if n, m := api.tokenReviews.Load(), api.accessReviews.Load(); n != 3 || m != 3 {
		t.Fatalf("after %s the token is reviewed again, the allowed rule kept: %d and %d", authnTTL, n, m)
	}
	api.down.Store(true)
	now = now.Add(allowTTL)
	if code := do("reader-token"); code != http.StatusInternalServerError {
		t.Fatalf("with the API server failing a scrape gave %d, want 500", code)
	}
}

// TestCachesAreBounded: a flood of distinct tokens never grows memory past
// maxEntries answers.
func TestCachesAreBounded(t *testing.T) {
	var c ttlCache[bool]
	now := time.Now()
	for i := range 3 * maxEntries {
		c.put(string(rune(i)), true, now.Add(time.Minute))
		if len(c.m) > maxEntries {
			t.Fatalf("%d entries", len(c.m))
		}
	}
	if _, ok := c.get(string(rune(3*maxEntries-1)), now); !ok {
		t.Fatal("the last answer was dropped")
	}
	if _, ok := c.get(string(rune(3*maxEntries-1)), now.Add(time.Minute)); ok {
		t.Fatal("an expired answer was kept")
	}
}
