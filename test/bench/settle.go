package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
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

// etcdPost sends one call of etcd's v3 JSON gateway at base (loopback, no
// TLS: the bench's own etcd) and decodes the answer into out.
func etcdPost(ctx context.Context, base, path string, body, out any) error {
	in, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(in))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, bytes.TrimSpace(data))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// settleEtcd compacts etcd's history up to its current revision and
// defragments its database, so that every turn starts on a store of the
// same shape: the turn before deleted a namespace of thousands of objects,
// whose history and free pages the next turn would otherwise pay for. It
// returns the store before and after.
func settleEtcd(ctx context.Context, base string) (before, after etcdStore, err error) {
	if err := etcdPost(ctx, base, "/v3/maintenance/status", struct{}{}, &before); err != nil {
		return before, after, err
	}
	compaction := struct {
		Revision int64 `json:"revision,string"`
		Physical bool  `json:"physical"`
	}{before.Header.Revision, true}
	if err := etcdPost(ctx, base, "/v3/kv/compaction", compaction, nil); err != nil {
		return before, after, err
	}
	if err := etcdPost(ctx, base, "/v3/maintenance/defragment", struct{}{}, nil); err != nil {
		return before, after, err
	}
	err = etcdPost(ctx, base, "/v3/maintenance/status", struct{}{}, &after)
	return before, after, err
}

// turnStart logs the control plane's state as a turn starts (etcd's store,
// the API server's memory) and, with -settle-etcd, settles etcd first.
func (b *bench) turnStart(ctx context.Context) error {
	base := fmt.Sprintf("http://127.0.0.1:%d", b.s.Ports["etcd-client"])
	apiRSS := 0.0
	for _, p := range b.s.Procs {
		if p.Name == "kube-apiserver" {
			if st, err := readProcStats(p.PID); err == nil {
				apiRSS = st.RSSMiB
			}
		}
	}
	if !b.f.settleEtcd {
		var st etcdStore
		if err := etcdPost(ctx, base, "/v3/maintenance/status", struct{}{}, &st); err != nil {
			return err
		}
		logf("  control plane: etcd revision %d, database %.0f MiB (%.0f in use), kube-apiserver RSS %.0f MiB",
			st.Header.Revision, mib(st.DBSize), mib(st.DBSizeInUse), apiRSS)
		return nil
	}
	t := time.Now()
	before, after, err := settleEtcd(ctx, base)
	if err != nil {
		return fmt.Errorf("settling etcd: %w", err)
	}
	logf("  control plane: etcd compacted at revision %d and defragmented in %s: database %.0f MiB (%.0f in use) → %.0f MiB; kube-apiserver RSS %.0f MiB",
		before.Header.Revision, time.Since(t).Round(100*time.Millisecond), mib(before.DBSize), mib(before.DBSizeInUse), mib(after.DBSize), apiRSS)
	return nil
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
