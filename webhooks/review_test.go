package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// post sends body to h as the API server does and decodes the reply.
func post(t *testing.T, h http.Handler, contentType string, body []byte) admissionv1.AdmissionReview {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("reply %d %q: %v", w.Code, w.Body.String(), err)
	}
	return out
}

// reviewOf is a review body of the given version with req.
func reviewOf(t *testing.T, apiVersion string, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	body, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": "AdmissionReview", "request": req})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// Serve refuses what controller-runtime's ServeHTTP refuses, with the same
// codes, and answers in the review's own version under its UID.
func TestServeReadsReviewsAsControllerRuntime(t *testing.T) {
	wh := Mutating(testDefaults)
	req := testRequest.AdmissionRequest
	req.Kind, req.Operation = testKind, admissionv1.Create
	req.Object = runtime.RawExtension{Raw: object(t, map[string]any{"size": 3}, true)}
	v1 := reviewOf(t, "admission.k8s.io/v1", &req)
	for _, c := range []struct {
		name, contentType string
		body              []byte
		code              int32 // 0: allowed
		apiVersion        string
	}{
		{"v1", "application/json", v1, 0, "admission.k8s.io/v1"},
		{"v1beta1", "application/json", reviewOf(t, "admission.k8s.io/v1beta1", &req), 0, "admission.k8s.io/v1beta1"},
		{"no version", "application/json", reviewOf(t, "", &req), 0, "admission.k8s.io/v1"},
		{"no content type", "", v1, http.StatusBadRequest, "admission.k8s.io/v1"},
		{"yaml", "application/yaml", v1, http.StatusBadRequest, "admission.k8s.io/v1"},
		{"empty", "application/json", nil, http.StatusBadRequest, "admission.k8s.io/v1"},
		{"not JSON", "application/json", []byte("{"), http.StatusBadRequest, "admission.k8s.io/v1"},
		{"no request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest, "admission.k8s.io/v1"},
		{"too large", "application/json", append(v1[:len(v1)-1:len(v1)-1], []byte(`,"pad":"`+strings.Repeat("x", maxReviewBytes)+`"}`)...), http.StatusRequestEntityTooLarge, "admission.k8s.io/v1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := post(t, Serve(wh), c.contentType, c.body)
			if out.APIVersion != c.apiVersion || out.Kind != "AdmissionReview" {
				t.Errorf("answered as %s %s, want %s", out.APIVersion, out.Kind, c.apiVersion)
			}
			if c.code == 0 {
				if !out.Response.Allowed || out.Response.UID != req.UID || len(out.Response.Patch) == 0 {
					t.Errorf("not defaulted under its UID: %+v", out.Response)
				}
				return
			}
			if out.Response.Allowed || out.Response.Result == nil || out.Response.Result.Code != c.code {
				t.Errorf("want refused with %d: %+v", c.code, out.Response)
			}
		})
	}
}

// A handler that panics is answered with a server error under the
// request's UID, as controller-runtime's server answers it.
func TestServeRecoversAPanic(t *testing.T) {
	req := testRequest.AdmissionRequest
	req.Operation = admissionv1.Create
	out := post(t, Serve(&admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		panic("boom")
	})}), "application/json", reviewOf(t, "admission.k8s.io/v1", &req))
	if out.Response.Allowed || out.Response.UID != req.UID || out.Response.Result == nil || out.Response.Result.Code != http.StatusInternalServerError {
		t.Errorf("want a server error under the UID: %+v", out.Response)
	}
}

// The request a handler gets keeps its own bytes: the buffer it was read
// into serves the next review.
func TestServeHandsOverItsOwnBytes(t *testing.T) {
	var kept [][]byte
	h := Serve(&admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, r admission.Request) admission.Response {
		kept = append(kept, r.Object.Raw)
		return admission.Allowed("")
	})})
	var sent [][]byte
	for i := range 20 {
		req := testRequest.AdmissionRequest
		req.Operation = admissionv1.Create
		req.Object = runtime.RawExtension{Raw: object(t, map[string]any{"image": strings.Repeat(fmt.Sprint(i), 50*(20-i))}, true)}
		sent = append(sent, req.Object.Raw)
		post(t, h, "application/json", reviewOf(t, "admission.k8s.io/v1", &req))
	}
	for i := range sent {
		if !bytes.Equal(kept[i], sent[i]) {
			t.Fatalf("review %d's object changed after later reviews:\n%s\nwant\n%s", i, kept[i], sent[i])
		}
	}
}

// genericValidator is Validator through controller-runtime's generic
// validator, which decodes with the scheme: the reference for Handle.
type genericValidator struct{ *Validator }

func (genericValidator) ValidateDelete(context.Context, *cachev1alpha1.Memcached) (admission.Warnings, error) {
	return nil, nil
}

// For generated specs, valid and not, created and changed, the operator's
// webhooks answer through Serve as controller-runtime's server answers
// through its generic validator and its own ServeHTTP: allowed or not, the
// same status, warnings and patch.
func TestServeAnswersAsControllerRuntime(t *testing.T) {
	v := &Validator{Limits: policy.Limits{MaxSize: 10}, Defaults: testDefaults}
	generic := admission.WithValidator[*cachev1alpha1.Memcached](testScheme(t), genericValidator{v})
	pairs := map[string][2]http.Handler{
		"validate": {Serve(Validating(v)), generic},
		"mutate":   {Serve(Mutating(testDefaults)), Mutating(testDefaults)},
	}
	r := rand.New(rand.NewPCG(29, 2))
	refused := 0
	for i := range 1000 {
		spec, present := genSpec(r)
		oldSpec, oldPresent := genSpec(r)
		req := testRequest.AdmissionRequest
		req.Kind = testKind
		req.Operation = []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}[r.IntN(3)]
		req.Object = runtime.RawExtension{Raw: object(t, spec, present)}
		if req.Operation != admissionv1.Create {
			req.OldObject = runtime.RawExtension{Raw: object(t, oldSpec, oldPresent)}
		}
		body := reviewOf(t, "admission.k8s.io/v1", &req)
		for name, p := range pairs {
			ours, theirs := post(t, p[0], "application/json", body), post(t, p[1], "application/json", body)
			if !reflect.DeepEqual(ours, theirs) {
				t.Fatalf("case %d, %s %s %s:\n ours %+v\ntheirs %+v", i, name, req.Operation, req.Object.Raw, ours.Response, theirs.Response)
			}
			if !ours.Response.Allowed {
				refused++
			}
		}
	}
	// The generator must make specs the validator refuses, or the
	// comparison of refusals could not fail.
	if refused == 0 {
		t.Error("no generated review was refused")
	}
}
