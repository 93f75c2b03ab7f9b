package metricsauth

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzBearer: whatever a scraper sends as its Authorization header, a token
// is taken only from the Bearer scheme, in any case, and is never empty or
// padded with spaces.
func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  abc ", "BEARER", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer a b", "\xffBearer x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		req := &http.Request{Header: http.Header{"Authorization": []string{header}}}
		token, ok := bearer(req)
		if !ok {
			return
		}
		scheme, _, _ := strings.Cut(header, " ")
		if !strings.EqualFold(scheme, "bearer") || token == "" || strings.TrimSpace(token) != token || !strings.Contains(header, token) {
			t.Fatalf("%q gave token %q", header, token)
		}
	})
}
