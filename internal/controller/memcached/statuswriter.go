package memcached

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/status"
)

// statusWriter writes fleets' statuses and holds every rule about when a
// computed status is sent:
//
//   - one equal to the status the pass read is not sent;
//   - one computed over the same object as this process's last write is not
//     sent: the pass ran before that write reached the cache. Equal to it,
//     it is dropped; different, it waits staleRecheck for the cache, since
//     two passes of a new fleet would otherwise both write a first status;
//   - one that only reports a rollout's progress (status.ProgressOnly) waits
//     until interval after the fleet's last write, so a rollout costs its
//     transitions rather than a write per pod; the pass is asked for again
//     when it is due;
//   - such a report also waits, another interval, while the progress
//     reports of all fleets together have used up their rate (budget): a
//     thousand fleets rolling out at once then cost the API server what a
//     few do, and their transitions are not delayed;
//   - anything else, a new generation or any transition, is sent at once.
type statusWriter struct {
	// interval is the least time between two writes of a fleet that only
	// report progress; 0 sends every change.
	interval time.Duration
	// budget limits the progress reports of all fleets together; nil does
	// not.
	budget *rate.Limiter
	now    func() time.Time
	// last holds each fleet's last status write by this process
	// (types.NamespacedName → *statusWrite).
	last sync.Map
}

// progressBudget is the shared limit of progress reports at perSecond, which
// may come a second's worth at once; none when perSecond is 0.
func progressBudget(perSecond float64) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(perSecond), max(1, int(math.Ceil(perSecond))))
}

// staleRecheck is how long a status computed over a cache that has not yet
// seen this process's last write waits before the pass is run again.
const staleRecheck = time.Second

// statusWrite is a status this process wrote: when, the digest of what
// (statusDigest: a fleet's whole status would be held for each fleet only
// to be compared), and the resourceVersion of the object it was computed
// over.
type statusWrite struct {
	at     time.Time
	over   string
	status [sha256.Size]byte
}

// statusDigest digests a status as it is sent.
func statusDigest(st *cachev1alpha1.MemcachedStatus) [sha256.Size]byte {
	raw, err := json.Marshal(st)
	if err != nil {
		// A status that cannot be encoded cannot be sent either; no digest
		// matches it.
		return [sha256.Size]byte{}
	}
	return sha256.Sum256(raw)
}

// verdict is what the writer does with a computed status: send it for cause,
// or, when cause is "", not; a status held back is due after wait.
type verdict struct {
	cause string
	wait  time.Duration
}

// Causes of a status write, as memcached_operator_status_writes_total counts them.
const (
	statusProgress = "progress"
	statusChange   = "change"
)

// decide applies the rules to a fleet's status computed over read.
func (w *statusWriter) decide(read *cachev1alpha1.Memcached, computed *cachev1alpha1.MemcachedStatus, now time.Time) verdict {
	if apiequality.Semantic.DeepEqual(&read.Status, computed) {
		return verdict{}
	}
	var last *statusWrite
	if v, ok := w.last.Load(client.ObjectKeyFromObject(read)); ok {
		last = v.(*statusWrite)
	}
	if last != nil && last.over == read.ResourceVersion {
		if last.status == statusDigest(computed) {
			return verdict{}
		}
		// The cache has not yet seen that write, so the status read is not
		// the one to compare with: look again once it has.
		return verdict{wait: staleRecheck}
	}
	if w.interval <= 0 || last == nil || !status.ProgressOnly(&read.Status, computed) {
		return verdict{cause: statusChange}
	}
	if wait := w.interval - now.Sub(last.at); wait > 0 {
		return verdict{wait: wait}
	}
	if w.budget != nil && !w.budget.AllowN(now, 1) {
		return verdict{wait: w.interval}
	}
	return verdict{cause: statusProgress}
}

// write sends updated's status as a merge patch against read, when decide
// says so; held is how long a status held back waits.
func (w *statusWriter) write(ctx context.Context, c client.Client, read, updated *cachev1alpha1.Memcached) (held time.Duration, err error) {
	now := w.now()
	v := w.decide(read, &updated.Status, now)
	if v.cause == "" {
		return v.wait, nil
	}
	key := client.ObjectKeyFromObject(updated)
	if err := c.Status().Patch(ctx, updated, client.MergeFrom(read)); err != nil {
		return 0, fmt.Errorf("patching status of Memcached %s: %w", key, err)
	}
	statusWrites.WithLabelValues(v.cause).Inc()
	w.last.Store(key, &statusWrite{at: now, over: read.ResourceVersion, status: statusDigest(&updated.Status)})
	if log := ctrl.LoggerFrom(ctx).V(1); log.Enabled() {
		log.Info("Wrote status", "ready", conditionSummary(&updated.Status, cachev1alpha1.ConditionReady),
			"was", conditionSummary(&read.Status, cachev1alpha1.ConditionReady),
			"readyReplicas", updated.Status.ReadyReplicas, "nodes", len(updated.Status.Nodes),
			"changed", status.Changes(&read.Status, &updated.Status))
	}
	return 0, nil
}

// forget drops the fleet's last write.
func (w *statusWriter) forget(key types.NamespacedName) { w.last.Delete(key) }

// remembers names what the writer remembers of the fleet, for tests.
func (w *statusWriter) remembers(key types.NamespacedName) []string {
	if _, ok := w.last.Load(key); ok {
		return []string{"last status write"}
	}
	return nil
}

// conditionSummary is "Status/Reason" of a condition, for debug logs.
func conditionSummary(st *cachev1alpha1.MemcachedStatus, t string) string {
	c := meta.FindStatusCondition(st.Conditions, t)
	if c == nil {
		return "none"
	}
	return string(c.Status) + "/" + c.Reason
}
