package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
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

// turnStart logs the control plane's state as a turn starts: etcd's store
// and the API server's memory, which later turns inherit from earlier ones
// unless -fresh-control-plane starts each turn on a fresh one.
// The state line is a diagnostic: a failed status call is logged, not the
// run's end; a failed restart is.
func (b *bench) turnStart(ctx context.Context, turn int) error {
	if b.f.freshControlPlane {
		if err := b.freshControlPlane(ctx, turn); err != nil {
			return fmt.Errorf("fresh control plane: %w", err)
		}
	}
	b.logMachine()
	apiRSS := 0.0
	for _, p := range b.s.Procs {
		if p.Name == "kube-apiserver" {
			if st, err := readProcStats(p.PID); err == nil {
				apiRSS = st.RSSMiB
			}
		}
	}
	st, err := etcdStatus(ctx, b.etcdURL())
	if err != nil {
		logf("  control plane: kube-apiserver RSS %.0f MiB; etcd's status: %v", apiRSS, err)
		return nil
	}
	logf("  control plane: etcd revision %d, database %.0f MiB (%.0f in use), kube-apiserver RSS %.0f MiB",
		st.Header.Revision, mib(st.DBSize), mib(st.DBSizeInUse), apiRSS)
	return nil
}

// logMachine logs the machine's speed as the turn starts and the share of
// its CPU time the host took since the last turn started: a later turn's
// slower times are the machine's when those moved with them.
func (b *bench) logMachine() {
	speed, err := machineSpeed()
	if err != nil {
		logf("  machine: probe: %v", err)
		return
	}
	now, err := readCPUTimes()
	if err != nil {
		logf("  machine: %v", err)
		return
	}
	stolen := ""
	if b.cpuAtTurn.total > 0 {
		stolen = fmt.Sprintf("; %.1f %% of CPU time taken by the host (steal) since the last turn started", 100*stolenShare(b.cpuAtTurn, now))
	}
	b.cpuAtTurn = now
	logf("  machine: a pod's JSON decoded and encoded in %.1f µs (one core, best of 5 × 2,000)%s",
		float64(speed.Nanoseconds())/1000, stolen)
}

func (b *bench) etcdURL() string { return fmt.Sprintf("http://127.0.0.1:%d", b.s.Ports["etcd-client"]) }

// restartedEachTurn are the processes a fresh turn starts again, in the
// order they start. etcd's store is settled instead: the objects it keeps
// (nodes, the CRD, webhooks) are the cluster. kwok stays: a new kwok process
// takes a node over only once the old one's lease on it has expired, 40 s
// on, close to the controller manager's grace before it marks nodes
// NotReady.
var restartedEachTurn = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// freshControlPlane stops the operator and the API server, controller
// manager and scheduler, compacts and defragments etcd, then starts those
// processes again with their own command lines and waits until a Deployment
// gets a Ready pod: each turn then starts on the same state, not on the
// memory and caches the turns before it left behind.
func (b *bench) freshControlPlane(ctx context.Context, turn int) error {
	t := time.Now()
	if err := b.op.stop(); err != nil {
		return err
	}
	b.opConfig = ""
	again, err := b.s.stopNamed(restartedEachTurn, 5*time.Second)
	if err != nil {
		return err
	}
	// A killed API server may leave its last audit line unfinished: the next
	// window starts after it.
	if fi, err := os.Stat(b.s.auditLog()); err == nil {
		b.audit.offset = fi.Size()
	}
	settled := time.Now()
	before, after, err := settleEtcd(ctx, b.etcdURL())
	if err != nil {
		return fmt.Errorf("settling etcd: %w", err)
	}
	settleTime := time.Since(settled)
	if err := b.s.startAgain(ctx, again); err != nil {
		return err
	}
	if err := b.s.waitSchedulers(ctx); err != nil {
		return err
	}
	if err := smokeTest(ctx, b.admin, fmt.Sprintf("bench-smoke-turn-%d", turn)); err != nil {
		return err
	}
	logf("  control plane: fresh in %s: %d processes started again; etcd compacted at revision %d and defragmented in %s, %.0f MiB (%.0f in use) → %.0f MiB",
		time.Since(t).Round(100*time.Millisecond), len(again), before.Header.Revision,
		settleTime.Round(100*time.Millisecond), mib(before.DBSize), mib(before.DBSizeInUse), mib(after.DBSize))
	return nil
}

// etcdPost sends one call to etcd's v3 JSON gateway at base (loopback, no
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

// etcdStatus is etcd's account of its store.
func etcdStatus(ctx context.Context, base string) (etcdStore, error) {
	var st etcdStore
	err := etcdPost(ctx, base, "/v3/maintenance/status", struct{}{}, &st)
	return st, err
}

// settleEtcd compacts etcd's history up to its current revision and
// defragments its database: the turn before deleted a namespace of
// thousands of objects, whose history and free pages the next turn would
// otherwise inherit. It returns the store before and after.
func settleEtcd(ctx context.Context, base string) (before, after etcdStore, err error) {
	if before, err = etcdStatus(ctx, base); err != nil {
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
	after, err = etcdStatus(ctx, base)
	return before, after, err
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
