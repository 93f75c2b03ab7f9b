package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
)

// etcd 3.7's v3 gateway answers with its 64-bit numbers quoted.
func TestEtcdStatusReadsTheGatewaysQuotedNumbers(t *testing.T) {
	g := NewWithT(t)
	var path, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		path, body = r.Method+" "+r.URL.Path, string(b)
		_, _ = io.WriteString(w, `{"header":{"cluster_id":"1","revision":"918273"},"version":"3.7.3","dbSize":"257949696","dbSizeInUse":"52428800"}`)
	}))
	defer srv.Close()
	st, err := etcdStatus(context.Background(), srv.URL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(path + " " + body).To(Equal("POST /v3/maintenance/status {}"))
	g.Expect(st.Header.Revision).To(Equal(int64(918273)))
	g.Expect(mib(st.DBSize)).To(Equal(246.0))
	g.Expect(mib(st.DBSizeInUse)).To(Equal(50.0))
}

func TestEtcdStatusFailsOnAnError(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"etcdserver: no leader"}`, http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	_, err := etcdStatus(context.Background(), srv.URL)
	g.Expect(err).To(MatchError(ContainSubstring("no leader")))
}
