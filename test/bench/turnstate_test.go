package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
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

// fakeEtcd answers the v3 JSON gateway's calls settleEtcd makes, as etcd
// 3.7 spells them, and records each call's path and body.
func fakeEtcd(t *testing.T, failOn string) (url string, calls func() []string) {
	var (
		mu  sync.Mutex
		got []string
	)
	defragmented := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.URL.Path+" "+string(body))
		mu.Unlock()
		if r.URL.Path == failOn {
			http.Error(w, `{"error":"etcdserver: mvcc: required revision has been compacted"}`, http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/v3/maintenance/status":
			size := `"471859200"`
			if defragmented {
				size = `"52428800"`
			}
			_, _ = io.WriteString(w, `{"header":{"cluster_id":"1","revision":"918273"},"version":"3.7.3","dbSize":`+size+`,"dbSizeInUse":"52428800"}`)
		case "/v3/maintenance/defragment":
			defragmented = true
			_, _ = io.WriteString(w, `{"header":{}}`)
		default:
			_, _ = io.WriteString(w, `{"header":{}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

func TestSettleEtcdCompactsAtTheCurrentRevisionThenDefragments(t *testing.T) {
	g := NewWithT(t)
	url, calls := fakeEtcd(t, "")
	before, after, err := settleEtcd(context.Background(), url)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(calls()).To(Equal([]string{
		"/v3/maintenance/status {}",
		`/v3/kv/compaction {"revision":"918273","physical":true}`,
		"/v3/maintenance/defragment {}",
		"/v3/maintenance/status {}",
	}), "physical: the call returns once the history is gone, so the defragmentation frees it")
	g.Expect(before.Header.Revision).To(Equal(int64(918273)))
	g.Expect(mib(before.DBSize)).To(Equal(450.0))
	g.Expect(mib(before.DBSizeInUse)).To(Equal(50.0))
	g.Expect(mib(after.DBSize)).To(Equal(50.0))
}

func TestSettleEtcdStopsAtTheFirstFailedCall(t *testing.T) {
	g := NewWithT(t)
	url, calls := fakeEtcd(t, "/v3/kv/compaction")
	_, _, err := settleEtcd(context.Background(), url)
	g.Expect(err).To(MatchError(ContainSubstring("required revision has been compacted")))
	g.Expect(calls()).To(HaveLen(2), "no defragmentation after a failed compaction")
}
