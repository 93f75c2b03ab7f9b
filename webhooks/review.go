package webhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// maxReviewBytes is the largest review read, as controller-runtime's own:
// two objects of at most 3 MB each and the rest.
const maxReviewBytes = 7 << 20

// Serve answers AdmissionReviews with wh's handler. It does what
// controller-runtime's ServeHTTP does (size limit, content type, panic
// recovery and the request's logger through wh.Handle, the review's version
// echoed) with less garbage a request: the body is read into a reused
// buffer and the review decoded once, into its Go type, where
// controller-runtime grows a new buffer and decodes twice. The collector
// runs once per so many bytes allocated, and reviews that arrive while it
// runs wait longer, so a review's bytes show in the webhook's tail.
func Serve(wh *admission.Webhook) http.Handler { return &reviewServer{wh: wh} }

type reviewServer struct{ wh *admission.Webhook }

// buffers are reused for request and response bodies; one that grew past
// maxPooledBuffer for a large review is left to the collector.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBuffer = 64 << 10

func getBuffer() *bytes.Buffer {
	b, _ := buffers.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBuffer {
		buffers.Put(b)
	}
}

var reviewLog = logf.Log.WithName("admission")

func (s *reviewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in := getBuffer()
	defer putBuffer(in)
	review := admissionv1.AdmissionReview{}
	if status, err := readReview(r, in, &review); err != nil {
		reviewLog.Error(err, "unable to read the admission review")
		resp := admission.Errored(status, err)
		if review.Request != nil {
			resp.UID = review.Request.UID
		}
		s.write(w, review.TypeMeta, &resp)
		return
	}
	resp := s.wh.Handle(r.Context(), admission.Request{AdmissionRequest: *review.Request})
	s.write(w, review.TypeMeta, &resp)
}

// readReview reads r's body into buf and decodes it into review; on error,
// the status code of the reply.
func readReview(r *http.Request, buf *bytes.Buffer, review *admissionv1.AdmissionReview) (int32, error) {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return http.StatusBadRequest, fmt.Errorf("contentType=%s, expected application/json", ct)
	}
	if r.Body == nil {
		return http.StatusBadRequest, fmt.Errorf("request body is empty")
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil {
		return http.StatusBadRequest, err
	}
	if n > maxReviewBytes {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request entity is too large; limit is %d bytes", maxReviewBytes)
	}
	if n == 0 {
		return http.StatusBadRequest, fmt.Errorf("request body is empty")
	}
	// The object's bytes are copied out of buf (RawExtension keeps its
	// own), so buf can be reused once the reply is written.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(buf.Bytes(), review); err != nil {
		return http.StatusBadRequest, err
	}
	if review.Request == nil {
		return http.StatusBadRequest, fmt.Errorf("admission review has no request")
	}
	return 0, nil
}

// write replies with resp in a review of the request's version (v1 and
// v1beta1 reviews have the same fields), v1 when the request named none.
func (s *reviewServer) write(w http.ResponseWriter, tm metav1.TypeMeta, resp *admission.Response) {
	if tm.APIVersion == "" || tm.Kind == "" {
		tm = metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"}
	}
	out := getBuffer()
	defer putBuffer(out)
	if err := json.NewEncoder(out).Encode(&admissionv1.AdmissionReview{TypeMeta: tm, Response: &resp.AdmissionResponse}); err != nil {
		reviewLog.Error(err, "unable to encode the admission response")
		http.Error(w, "unable to encode the admission response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if _, err := w.Write(out.Bytes()); err != nil {
		reviewLog.V(1).Info("unable to write the admission response", "error", err.Error())
	}
}
