package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// etcdStore is what etcd says of its store (the v3 JSON gateway quotes its
// 64-bit numbers).
type etcdStore struct {
	Header struct {
		Revision int64 `json:"revision,string"`
	} `json:"header"`
	DBSize      int64 `json:"dbSize,string"`
	DBSizeInUse int64 `json:"dbSizeInUse,string"`
}

// turnStart logs the control plane's state as a turn starts: etcd's store
// and the API server's memory, which later turns inherit from earlier ones.
// It is a diagnostic: a failed status call is logged, not the run's end.
func (b *bench) turnStart(ctx context.Context) {
	apiRSS := 0.0
	for _, p := range b.s.Procs {
		if p.Name == "kube-apiserver" {
			if st, err := readProcStats(p.PID); err == nil {
				apiRSS = st.RSSMiB
			}
		}
	}
	st, err := etcdStatus(ctx, fmt.Sprintf("http://127.0.0.1:%d", b.s.Ports["etcd-client"]))
	if err != nil {
		logf("  control plane: kube-apiserver RSS %.0f MiB; etcd's status: %v", apiRSS, err)
		return
	}
	logf("  control plane: etcd revision %d, database %.0f MiB (%.0f in use), kube-apiserver RSS %.0f MiB",
		st.Header.Revision, mib(st.DBSize), mib(st.DBSizeInUse), apiRSS)
}

// etcdStatus asks etcd's v3 JSON gateway at base (loopback, no TLS: the
// bench's own etcd) for its store's state.
func etcdStatus(ctx context.Context, base string) (etcdStore, error) {
	var st etcdStore
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v3/maintenance/status", strings.NewReader("{}"))
	if err != nil {
		return st, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("etcd status: %s: %s", resp.Status, bytes.TrimSpace(data))
	}
	return st, json.Unmarshal(data, &st)
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
