package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

var testRequest = &admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
	UID: "req-1", Namespace: "team-a", Name: "cache",
	Resource: metav1.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"},
	UserInfo: authenticationv1.UserInfo{Username: "alice"},
}}

// A line written through the request's logger names the request, its
// caller, and the values added after; a disabled line writes nothing.
func TestRequestLoggerNamesTheRequest(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) },
		funcr.Options{LogCaller: funcr.All, Verbosity: 1}).WithName("admission")

	log := RequestLogger(base, testRequest).WithName("memcached").WithValues("step", "default")
	log.Error(errors.New("boom"), "refused") // the caller this line must name
	log.V(1).Info("checked")
	log.V(2).Info("not written")

	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d: %q", len(lines), lines)
	}
	for _, want := range []string{
		`"requestID"="req-1"`, `"user"="alice"`, `"namespace"="team-a"`, `"name"="cache"`,
		`"Memcached"={"name"="cache" "namespace"="team-a"}`, `"webhookKind"="Memcached"`,
		`"step"="default"`, `admission/memcached`,
	} {
		for _, l := range lines {
			if !strings.Contains(l, want) {
				t.Errorf("line %q lacks %s", l, want)
			}
		}
	}
	if !strings.Contains(lines[0], `"file"="log_test.go"`) || !strings.Contains(lines[0], `"error"="boom"`) {
		t.Errorf("the error line names the wrong caller or no error: %q", lines[0])
	}
	if strings.Contains(lines[0], "not written") || strings.Contains(lines[1], "not written") {
		t.Errorf("a disabled line was written: %q", lines)
	}
}

// countingSink counts the values handed to it, so a test can see when the
// request's values reach the logger.
type countingSink struct {
	logr.LogSink
	withValues *atomic.Int64
}

func (c countingSink) WithValues(kv ...any) logr.LogSink {
	c.withValues.Add(1)
	return countingSink{LogSink: c.LogSink.WithValues(kv...), withValues: c.withValues}
}

func (c countingSink) WithName(name string) logr.LogSink {
	return countingSink{LogSink: c.LogSink.WithName(name), withValues: c.withValues}
}

// An admitted request that logs nothing never hands its values to the
// logger: encoding them is what the deferral saves.
func TestAdmittedRequestEncodesNoLogValues(t *testing.T) {
	var withValues atomic.Int64
	base := logr.New(countingSink{LogSink: zap.New(zap.WriteTo(io.Discard)).GetSink(), withValues: &withValues})
	wh := &admission.Webhook{Handler: &Defaulter{}, LogConstructor: onBase(base, RequestLogger)}
	serve(t, wh, reviewBody(t))
	if n := withValues.Load(); n != 0 {
		t.Errorf("the logger was given values %d times for a request that logged nothing", n)
	}

	// The same request through controller-runtime's own constructor does
	// hand them over, so the count above can fail.
	wh.LogConstructor = onBase(base, admission.DefaultLogConstructor)
	serve(t, wh, reviewBody(t))
	if withValues.Load() == 0 {
		t.Error("the default constructor gave no values: the count sees nothing")
	}
}

// BenchmarkAdmission measures what one mutating and one validating request
// cost the webhooks as the operator serves them (go test ./webhooks -run X
// -bench Admission -benchmem), with the operator's logger at its default
// level; "crServe" is the same webhook behind controller-runtime's own
// ServeHTTP, which Serve replaced.
func BenchmarkAdmission(b *testing.B) {
	s := testScheme(b)
	base := zap.New(zap.WriteTo(io.Discard))
	body := reviewBody(b)
	for _, c := range []struct {
		name string
		ctor func(logr.Logger, *admission.Request) logr.Logger
	}{{"RequestLogger", RequestLogger}, {"defaultLogConstructor", admission.DefaultLogConstructor}} {
		for name, wh := range map[string]*admission.Webhook{
			"mutate": Mutating(policy.Config{}),
			// What the operator's defaulting cost through controller-runtime's
			// generic defaulter, which Defaulter replaced.
			"mutate-generic": admission.WithDefaulter[*cachev1alpha1.Memcached](s, genericDefaulter{}),
			"validate": Validating(&Validator{
				Limits: policy.Limits{MaxSize: 10}, Defaults: policy.Config{DefaultImage: "memcached:1.6"},
			}),
		} {
			wh.LogConstructor = onBase(base, c.ctor)
			for server, h := range map[string]http.Handler{"Serve": Serve(wh), "crServe": wh} {
				b.Run(name+"/"+c.name+"/"+server, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						serve(b, h, body)
					}
				})
			}
		}
	}
}

// onBase builds the request's logger on base instead of the webhook's own,
// which only the manager sets.
func onBase(base logr.Logger, ctor func(logr.Logger, *admission.Request) logr.Logger) func(logr.Logger, *admission.Request) logr.Logger {
	return func(_ logr.Logger, req *admission.Request) logr.Logger { return ctor(base, req) }
}

func testScheme(tb testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := cachev1alpha1.AddToScheme(s); err != nil {
		tb.Fatal(err)
	}
	return s
}

// reviewBody is a CREATE review of a Memcached, as the API server sends it.
func reviewBody(tb testing.TB) []byte {
	raw, err := json.Marshal(&cachev1alpha1.Memcached{
		TypeMeta:   metav1.TypeMeta{APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "team-a"},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	req := testRequest.AdmissionRequest
	req.Kind = metav1.GroupVersionKind{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"}
	req.Operation = admissionv1.Create
	req.Object = runtime.RawExtension{Raw: raw}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

func serve(tb testing.TB, h http.Handler, body []byte) {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed {
		tb.Fatalf("not admitted (%d): %s", w.Code, w.Body.String())
	}
}
