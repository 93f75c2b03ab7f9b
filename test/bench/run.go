package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runFlags are the knobs of `bench run` (the Makefile's BENCH_* variables).
type runFlags struct {
	commonFlags
	n, workers, size, resizeTo int
	idle                       time.Duration
	churnRounds                int
	churnFraction              float64
	admissionRates             string
	admissionDuration          time.Duration
	admissionTurn              time.Duration
	sweepWorkers, sweepN       string
	sweepQPS                   string
	ci                         bool
	operatorBin                string
	operatorMemoryLimit        string
	operatorFlags              string
	operatorEnv                string
	profileSeconds             int
	apiServerProfileSeconds    int
	order                      string
	stable                     bool
	freshControlPlane          bool
	// secondReference is how the second reference line writes.
	secondReference referenceWrites
}

// What the bench's fleets run on: Deployments (the default), or stable pods
// on StatefulSets with warm restarts.
const (
	deploymentFleets = false
	stableFleets     = true
)

// The orders the clients run in. A turn's time moves with its place in the
// run even on a fresh control plane (the machine drifts), so a single order
// measures the order as much as the operator; balanced runs every client
// twice in mirrored places (see turns) and compares the means.
const (
	orderReferenceFirst = "reference-first"
	orderReferenceLast  = "reference-last"
	orderBalanced       = "balanced"
)

func cmdRun(ctx context.Context, args []string) error {
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	f.register(fs)
	fs.IntVar(&f.n, "n", 100, "Memcached fleets.")
	fs.IntVar(&f.workers, "workers", 16, "The operator's --max-concurrent-reconciles (its default), and the reference's workers.")
	fs.IntVar(&f.size, "size", 3, "Pods per fleet.")
	fs.IntVar(&f.resizeTo, "resize-to", 5, "Pods per fleet after the resize.")
	fs.DurationVar(&f.idle, "idle", 10*time.Minute, "Length of the idle window (after a forced resync).")
	fs.IntVar(&f.churnRounds, "churn-rounds", 3, "Rounds of pod deletion.")
	fs.Float64Var(&f.churnFraction, "churn-fraction", 0.1, "Share of the pods deleted per churn round.")
	fs.StringVar(&f.admissionRates, "admission-rates", "50,200,1000", "Admission request rates (per second), comma-separated; empty skips the scenario.")
	fs.DurationVar(&f.admissionDuration, "admission-duration", 20*time.Second, "Length of each admission rate step: 20 s gives a p99 at 200/s over 4,000 requests a path.")
	fs.DurationVar(&f.admissionTurn, "admission-turn", 100*time.Millisecond, "How long one webhook server is loaded before the next takes its turn, within each rate step.")
	fs.StringVar(&f.sweepWorkers, "sweep-workers", "", "Worker counts for the converge-vs-workers curve (at -n), e.g. 1,2,4,8,16.")
	fs.StringVar(&f.sweepN, "sweep-n", "", "Fleet counts for the converge-vs-N curve (at -workers), e.g. 50,100,200.")
	fs.StringVar(&f.sweepQPS, "sweep-qps", "", "Client-side limits of the operator (--kube-api-qps) for the converge-vs-QPS curve (at -n and -workers), e.g. 10,25,50,100,0 (0: no limit).")
	fs.BoolVar(&f.ci, "ci", false, "Check the bench's own correctness (every fleet converges, 0 idle and restart writes, 0 admission errors); report times without judging them.")
	fs.StringVar(&f.operatorBin, "operator", "", "Operator binary (default BIN-DIR/memcached-operator).")
	fs.StringVar(&f.operatorMemoryLimit, "operator-memory-limit", "", "Run the operator in a memory cgroup with this limit (e.g. 64Mi), as a container with resources.limits.memory; needs root.")
	fs.StringVar(&f.operatorFlags, "operator-flags", "", "More flags of the operator, space-separated, after the bench's own (e.g. --zap-log-level=1 --status-progress-interval=1s): the results record them.")
	fs.StringVar(&f.operatorEnv, "operator-env", "", "More environment of the operator, space-separated NAME=VALUE (e.g. GODEBUG=gctrace=1 GOGC=50): the results record it.")
	fs.StringVar(&f.order, "order", orderBalanced, "Order of the two clients on the one control plane: balanced (reference, operator, operator, reference: the ratios compare the means of both runs), reference-first or reference-last (one run each).")
	second := fs.String("second-reference", "apply", "How the second reference line writes: apply (the cheapest client's writes through server-side apply) or prompt (the cheapest client's, and a status naming each new generation at once).")
	referenceLast := fs.Bool("reference-last", false, "Short for -order reference-last.")
	fs.BoolVar(&f.stable, "stable-fleets", true, "Then converge and resize N fleets of stable pods with warm restarts (workload StatefulSet), the reference first, then the operator.")
	fs.BoolVar(&f.freshControlPlane, "fresh-control-plane", true, "Start every turn on a fresh control plane: restart kube-apiserver, kube-controller-manager and kube-scheduler, and compact and defragment etcd, so that no client inherits the turns before it.")
	fs.IntVar(&f.apiServerProfileSeconds, "apiserver-profile-seconds", 0, "Record the API server's CPU in profiles of this length, back to back, through every timed phase (0: none); the log names each phase's files.")
	fs.IntVar(&f.profileSeconds, "profile-seconds", 20, "Length of the CPU profiles taken from the start of the operator's converge and of its resize (0: none).")
	_ = fs.Parse(args)
	if *referenceLast {
		f.order = orderReferenceLast
	}
	switch *second {
	case "apply":
		f.secondReference = writesApply
	case "prompt":
		f.secondReference = writesPrompt
	default:
		return fmt.Errorf("-second-reference %q: want apply or prompt", *second)
	}
	if err := checkAdmissionTurn(f.admissionTurn, f.admissionRates); err != nil {
		return err
	}
	if !slices.Contains([]string{orderReferenceFirst, orderReferenceLast, orderBalanced}, f.order) {
		return fmt.Errorf("-order %q: want %s, %s or %s", f.order, orderBalanced, orderReferenceFirst, orderReferenceLast)
	}
	if f.operatorBin == "" {
		f.operatorBin = filepath.Join(f.binDir, "memcached-operator")
	}
	b, err := newBench(ctx, f)
	if err != nil {
		return err
	}
	defer func() { _ = b.op.stop() }()
	runErr := b.run(ctx)
	if runErr != nil {
		logf("%s", b.explain())
	}
	if err := b.report(); err != nil {
		return errors.Join(runErr, err)
	}
	if runErr != nil {
		return runErr
	}
	if failed := b.res.failedChecks(f.ci); len(failed) > 0 {
		return fmt.Errorf("%d check(s) failed: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

// explain says what a failed run's cause may be read from: the operator's
// state, the end of its log and the API server's last failed webhook calls.
// CI keeps only the bench's output, not its files.
func (b *bench) explain() string {
	opLog := filepath.Join(b.op.dir, "operator.log")
	apiLog := filepath.Join(b.s.Dir, "logs", "kube-apiserver.log")
	return fmt.Sprintf("%s\nend of %s:\n%slast failed webhook calls in %s:\n%s",
		b.op.state(), opLog, lastLines(opLog, 40, ""), apiLog, lastLines(apiLog, 20, "alling webhook"))
}

// lastLines returns the last n lines of file that contain substr.
func lastLines(file string, n int, substr string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	var keep []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, substr) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "")
}

// bench is one `bench run`.
type bench struct {
	f      runFlags
	s      *clusterState
	out    string
	admin  client.Client
	audit  *auditReader
	op     *operatorProc
	res    *results
	wallT0 time.Time
	// opConfig is "namespace/workers" of the running operator.
	opConfig string
	// watch is the bench's view of the operator's namespace.
	watch *watcher
	// sweepOp is the last operator converge that is not the main one: a
	// sweep point's, or an operatorPair's.
	sweepOp *phaseResult
	// profiling is held while a CPU profile runs: the Go runtime takes one
	// at a time, and a phase can end before its profile does.
	profiling sync.Mutex
	// apiProfilePhase numbers the phases the API server was profiled in.
	apiProfilePhase int
	// cpuAtTurn is the machine's CPU time as the last turn started.
	cpuAtTurn cpuTimes
}

func newBench(ctx context.Context, f runFlags) (*bench, error) {
	out, err := filepath.Abs(f.out)
	if err != nil {
		return nil, err
	}
	s, err := loadState(filepath.Join(out, "cluster"))
	if err != nil || !s.alive() {
		return nil, fmt.Errorf("no bench cluster running in %s (make bench-cluster-up): %w", filepath.Join(out, "cluster"), err)
	}
	admin, err := newClient(s, userAdmin, 0)
	if err != nil {
		return nil, err
	}
	marker, err := newClient(s, userMarker, 0)
	if err != nil {
		return nil, err
	}
	op, err := newOperatorProc(s, f.operatorBin, filepath.Join(out, "operator"), strings.Fields(f.operatorFlags), strings.Fields(f.operatorEnv))
	if err != nil {
		return nil, err
	}
	op.memoryLimit = f.operatorMemoryLimit
	b := &bench{f: f, s: s, out: out, admin: admin, op: op, wallT0: time.Now(),
		audit: &auditReader{path: s.auditLog(), marker: marker},
		res:   newResults(f, s)}
	repo, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if err := installCRD(ctx, admin, repo); err != nil {
		return nil, err
	}
	if err := op.installWebhooks(ctx, admin); err != nil {
		return nil, err
	}
	return b, nil
}

// timeout of a converge or resize of n fleets: generous; a bench that hangs
// is a failure to report, not to wait for.
func convergeTimeout(n int) time.Duration {
	return 3*time.Minute + time.Duration(n)*600*time.Millisecond
}

func (b *bench) run(ctx context.Context) error {
	f := b.f
	logf("bench run: N=%d size=%d workers=%d nodes=%d", f.n, f.size, f.workers, b.s.Nodes)

	order := turns(f.order)
	if f.stable {
		order = append(order, turnStableReference, turnStableOperator)
	}
	for i, t := range order {
		logf("turn %d of %d (-order %s): %s", i+1, len(order), f.order, t.named(f.secondReference))
		if err := b.turnStart(ctx, i+1); err != nil {
			return err
		}
		var err error
		switch t {
		case turnReference:
			b.res.Reference, err = b.referenceRun(ctx, "bench-ref", f.n, f.workers, true, deploymentFleets, writesCheapest)
		case turnApplyReference:
			b.res.ApplyReference, err = b.referenceRun(ctx, "bench-ref-apply", f.n, f.workers, true, deploymentFleets, f.secondReference)
		case turnApplyReferenceAgain:
			b.res.ApplyReferenceAgain, err = b.referenceRun(ctx, "bench-ref-apply-again", f.n, f.workers, true, deploymentFleets, f.secondReference)
		case turnOperator:
			err = b.operatorScenarios(ctx, "bench-op")
		case turnOperatorAgain:
			b.res.OperatorAgain, err = b.operatorPair(ctx, "bench-op-again", deploymentFleets)
		case turnReferenceAgain:
			b.res.ReferenceAgain, err = b.referenceRun(ctx, "bench-ref-again", f.n, f.workers, true, deploymentFleets, writesCheapest)
		case turnStableReference:
			b.res.StableReference, err = b.referenceRun(ctx, "bench-ref-stable", f.n, f.workers, true, stableFleets, writesCheapest)
		case turnStableOperator:
			b.res.StableOperator, err = b.operatorPair(ctx, "bench-op-stable", stableFleets)
		}
		if err != nil {
			return err
		}
	}
	return b.sweeps(ctx)
}

// A turn is one client's run on the shared control plane, in a namespace of
// its own that is deleted before the next turn starts.
type turn string

const (
	turnReference           turn = "reference, the cheapest client"
	turnApplyReference      turn = "reference through server-side apply"
	turnOperator            turn = "operator: every scenario"
	turnOperatorAgain       turn = "operator again: converge and resize"
	turnApplyReferenceAgain turn = "reference through server-side apply, again"
	turnReferenceAgain      turn = "reference, the cheapest client, again"
	// The stable fleets' pair, after the main turns: one order only.
	turnStableReference turn = "reference: stable fleets with warm restarts"
	turnStableOperator  turn = "operator: stable fleets with warm restarts, converge and resize"
)

// named is the turn as its log line says it: the second reference line's
// turns name the client -second-reference runs.
func (t turn) named(second referenceWrites) string {
	switch t {
	case turnApplyReference:
		return "reference: " + second.client()
	case turnApplyReferenceAgain:
		return "reference: " + second.client() + ", again"
	}
	return string(t)
}

// turns is the order's sequence: balanced runs each of the three clients
// twice, at places that mirror each other (1 and 6, 2 and 5, 3 and 4), so
// what running later costs falls on each alike.
func turns(order string) []turn {
	switch order {
	case orderReferenceLast:
		return []turn{turnOperator, turnApplyReference, turnReference}
	case orderBalanced:
		return []turn{turnReference, turnApplyReference, turnOperator, turnOperatorAgain, turnApplyReferenceAgain, turnReferenceAgain}
	}
	return []turn{turnReference, turnApplyReference, turnOperator}
}

// operatorScenarios converges, resizes, idles, churns, restarts and loads
// the admission webhooks with a fresh operator on ns, then deletes ns.
func (b *bench) operatorScenarios(ctx context.Context, ns string) error {
	if err := b.operatorConverge(ctx, ns, b.f.n, b.f.workers, true, deploymentFleets); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func(context.Context, string) error
	}{
		{"resize", b.operatorResize},
		{"idle", b.idle},
		{"churn", b.churn},
		{"restart", b.restart},
		{"admission", b.admission},
	}
	for _, st := range steps {
		if err := st.run(ctx, ns); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	if err := b.op.stop(); err != nil {
		return err
	}
	return deleteNamespace(ctx, b.admin, ns, convergeTimeout(b.f.n))
}

// referenceRun converges n fleets with the reference client (and, when
// resize, resizes them), then deletes the namespace.
func (b *bench) referenceRun(ctx context.Context, ns string, n, workers int, resize, stable bool, writes referenceWrites) (*pairResult, error) {
	// The operator serves the webhooks every Memcached write goes through;
	// it watches another namespace meanwhile.
	if err := b.ensureOperator(ctx, "bench-op", b.f.workers); err != nil {
		return nil, err
	}
	if err := createNamespace(ctx, b.admin, ns); err != nil {
		return nil, err
	}
	refCtx, stopRef := context.WithCancel(ctx)
	defer stopRef()
	ref, err := startReference(refCtx, b.s, ns, workers, stable, writes)
	if err != nil {
		return nil, err
	}
	w, err := newWatcher(refCtx, b.s, ns, stable)
	if err != nil {
		return nil, err
	}
	res := &pairResult{N: n, Workers: workers, Writes: string(writes)}
	logf("reference (%s): converge N=%d workers=%d stable=%t", writes, n, workers, stable)
	res.Converge, err = b.timedPhase(ctx, w, userReference, n, b.f.size, false, func(ctx context.Context) error {
		return createFleets(ctx, b.admin, ns, n, int32(b.f.size), stable)
	})
	if err != nil {
		return res, fmt.Errorf("reference converge: %w", err)
	}
	if resize {
		logf("reference: resize %d → %d", b.f.size, b.f.resizeTo)
		res.Resize, err = b.timedPhase(ctx, w, userReference, n, b.f.resizeTo, false, func(ctx context.Context) error {
			return resizeFleets(ctx, b.admin, ns, n, int32(b.f.resizeTo))
		})
		if err != nil {
			return res, fmt.Errorf("reference resize: %w", err)
		}
	}
	if errs := ref.errors(); len(errs) > 0 {
		logf("reference met %d errors (retried), first: %v", len(errs), errs[0])
		res.ReferenceErrors = len(errs)
	}
	stopRef()
	t := time.Now()
	if err := deleteNamespace(ctx, b.admin, ns, convergeTimeout(n)); err != nil {
		return res, err
	}
	logf("reference: namespace %s deleted in %s", ns, time.Since(t).Round(100*time.Millisecond))
	return res, nil
}

// ensureOperator runs the operator on ns with workers, restarting it if it
// runs with other settings.
func (b *bench) ensureOperator(ctx context.Context, ns string, workers int, extra ...string) error {
	want := fmt.Sprintf("%s/%d/%s", ns, workers, strings.Join(extra, " "))
	if b.op.cmd != nil && b.opConfig == want {
		return nil
	}
	if err := b.op.stop(); err != nil {
		return err
	}
	b.opConfig = want
	return b.op.start(ctx, ns, workers, extra...)
}

// The operator's status writes that only reported progress.
const (
	progressWritesMetric = "memcached_operator_status_writes_total"
	progressWritesLabel  = `cause="progress"`
)

// timedPhase runs act (the user's action) at t0, waits until n fleets are
// ready, and counts user's requests from t0 to then.
func (b *bench) timedPhase(ctx context.Context, w *watcher, user string, n int, size int, withPods bool, act func(context.Context) error) (*phaseResult, error) {
	if err := b.audit.skip(ctx); err != nil {
		return nil, err
	}
	var before procStats
	var progress0 float64
	if user == userOperator {
		before, _ = b.op.stats()
		var err error
		if progress0, err = b.op.metric(ctx, progressWritesMetric, progressWritesLabel); err != nil {
			return nil, err
		}
	}
	api0, etcd0 := b.controlPlaneCPU()
	stopProfiles := b.apiServerProfiles(ctx, fmt.Sprintf("%s's phase to size %d", user, size))
	defer stopProfiles()
	t0 := time.Now()
	if err := act(ctx); err != nil {
		return nil, err
	}
	actDone := time.Since(t0)
	conv, err := w.waitConverged(ctx, n, int32(size), t0, withPods, convergeTimeout(n))
	times := conv.times
	elapsed := time.Since(t0)
	counts, cerr := b.audit.window(ctx, user)
	if cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	p := &phaseResult{
		Seconds: elapsed.Seconds(), UserActionSeconds: actDone.Seconds(), Fleets: n, Converged: len(times),
		Requests: counts, WritesPerFleet: float64(counts.Writes) / float64(n),
		WritesPerFleetExclEvents: float64(counts.WritesExclEvents) / float64(n),
	}
	if len(times) > 0 {
		p.FleetP50Seconds = times[len(times)/2].Seconds()
		p.FleetP99Seconds = times[min(len(times)-1, len(times)*99/100)].Seconds()
		p.Seconds = times[len(times)-1].Seconds()
		for _, t := range times {
			p.ReadyAt = append(p.ReadyAt, round3(t.Seconds()))
		}
	}
	p.StatusLagP50Seconds, p.StatusLagP99Seconds = percentiles(conv.lags)
	p.EndpointsLagP50Seconds, p.EndpointsLagP99Seconds = percentiles(conv.endpointLags)
	p.StatusAfterEndpointsP50Seconds, p.StatusAfterEndpointsP99Seconds = percentiles(conv.afterEndpoints)
	p.GenerationLagP50Seconds, p.GenerationLagP99Seconds = percentiles(conv.generationLags)
	if g := conv.generationLags; len(g) > 0 {
		p.GenerationLagMaxSeconds = round3(g[len(g)-1].Seconds())
	}
	p.DeploymentLagP50Seconds, p.DeploymentLagP99Seconds = percentiles(conv.deploymentLags)
	if g := conv.deploymentLags; len(g) > 0 {
		p.DeploymentLagMaxSeconds = round3(g[len(g)-1].Seconds())
	}
	api1, etcd1 := b.controlPlaneCPU()
	p.APIServerCPUSeconds, p.EtcdCPUSeconds = round3(api1-api0), round3(etcd1-etcd0)
	if user == userOperator {
		after, _ := b.op.stats()
		p.CPUSeconds = after.CPUSeconds - before.CPUSeconds
		p.CPUSecondsPerFleet = p.CPUSeconds / float64(n)
		p.PeakRSSMiB = after.PeakRSSMiB
		progress1, perr := b.op.metric(ctx, progressWritesMetric, progressWritesLabel)
		if perr != nil {
			return nil, errors.Join(err, perr)
		}
		p.ProgressWrites = int(progress1 - progress0)
	}
	logf("  %s: status named the new generation after p50/p99/max %.2fs/%.2fs/%.2fs, after the Deployment's update %.2fs/%.2fs/%.2fs", user,
		p.GenerationLagP50Seconds, p.GenerationLagP99Seconds, p.GenerationLagMaxSeconds,
		p.DeploymentLagP50Seconds, p.DeploymentLagP99Seconds, p.DeploymentLagMaxSeconds)
	logf("  %s: %d/%d fleets ready in %.1fs (p50 %.1fs; status behind the rollout p50 %.2fs, p99 %.2fs: endpoints %.2fs/%.2fs, then status %.2fs/%.2fs), %d writes (%.2f/fleet; %s)",
		user, p.Converged, n, p.Seconds, p.FleetP50Seconds, p.StatusLagP50Seconds, p.StatusLagP99Seconds,
		p.EndpointsLagP50Seconds, p.EndpointsLagP99Seconds, p.StatusAfterEndpointsP50Seconds, p.StatusAfterEndpointsP99Seconds,
		counts.Writes, p.WritesPerFleet, counts)
	logf("  %s: kube-apiserver %.1f CPU s, etcd %.1f CPU s", user, p.APIServerCPUSeconds, p.EtcdCPUSeconds)
	return p, err
}

// controlPlaneCPU is the CPU time kube-apiserver and etcd have used so far,
// in seconds.
func (b *bench) controlPlaneCPU() (apiServer, etcd float64) {
	for _, p := range b.s.Procs {
		st, err := readProcStats(p.PID)
		if err != nil {
			continue
		}
		switch p.Name {
		case "kube-apiserver":
			apiServer = st.CPUSeconds
		case "etcd":
			etcd = st.CPUSeconds
		}
	}
	return apiServer, etcd
}

// percentiles are the p50 and p99 of sorted durations, in seconds (0, 0 when empty).
func percentiles(sorted []time.Duration) (p50, p99 float64) {
	if len(sorted) == 0 {
		return 0, 0
	}
	return round3(sorted[len(sorted)/2].Seconds()), round3(sorted[min(len(sorted)-1, len(sorted)*99/100)].Seconds())
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// operatorConverge starts a fresh operator on ns and converges n fleets.
func (b *bench) operatorConverge(ctx context.Context, ns string, n, workers int, main, stable bool, extra ...string) error {
	if err := b.op.stop(); err != nil {
		return err
	}
	b.opConfig = ""
	if err := createNamespace(ctx, b.admin, ns); err != nil {
		return err
	}
	if err := b.ensureOperator(ctx, ns, workers, extra...); err != nil {
		return err
	}
	w, err := newWatcher(ctx, b.s, ns, stable)
	if err != nil {
		return err
	}
	if b.watch != nil {
		b.watch.stop()
	}
	b.watch = w
	if main {
		if st, serr := b.op.stats(); serr == nil {
			b.res.OperatorProcessAtStart = &st
		}
		b.cpuProfile(ctx, "converge-cpu.pprof")
	}
	logf("operator: converge N=%d workers=%d stable=%t", n, workers, stable)
	p, err := b.timedPhase(ctx, w, userOperator, n, b.f.size, false, func(ctx context.Context) error {
		return createFleets(ctx, b.admin, ns, n, int32(b.f.size), stable)
	})
	if main {
		b.res.Operator = &pairResult{N: n, Workers: workers, Converge: p}
		if st, serr := b.op.stats(); serr == nil {
			b.res.OperatorProcess = &st
		}
		b.heapProfile(ctx, "converged-heap.pprof")
		if costs, cerr := b.cacheCost(ctx, ns, n); cerr != nil {
			logf("cache cost: %v", cerr)
		} else {
			b.res.CacheCost = costs
		}
	} else {
		b.sweepOp = p
	}
	if err != nil {
		return fmt.Errorf("operator converge: %w", err)
	}
	return nil
}

// operatorPair is a fresh operator's converge and resize of the fleets on
// ns, which is then deleted: the balanced order's third run, and the stable
// fleets' run.
func (b *bench) operatorPair(ctx context.Context, ns string, stable bool) (*pairResult, error) {
	err := b.operatorConverge(ctx, ns, b.f.n, b.f.workers, false, stable)
	res := &pairResult{N: b.f.n, Workers: b.f.workers, Converge: b.sweepOp}
	if err != nil {
		return res, err
	}
	logf("operator: resize %d → %d (%s)", b.f.size, b.f.resizeTo, ns)
	res.Resize, err = b.timedPhase(ctx, b.watch, userOperator, b.f.n, b.f.resizeTo, false, func(ctx context.Context) error {
		return resizeFleets(ctx, b.admin, ns, b.f.n, int32(b.f.resizeTo))
	})
	if err != nil {
		return res, fmt.Errorf("operator resize (%s): %w", ns, err)
	}
	if err := b.op.stop(); err != nil {
		return res, err
	}
	return res, deleteNamespace(ctx, b.admin, ns, convergeTimeout(b.f.n))
}

func (b *bench) operatorResize(ctx context.Context, ns string) error {
	logf("operator: resize %d → %d", b.f.size, b.f.resizeTo)
	b.cpuProfile(ctx, "resize-cpu.pprof")
	p, err := b.timedPhase(ctx, b.watch, userOperator, b.f.n, b.f.resizeTo, false, func(ctx context.Context) error {
		return resizeFleets(ctx, b.admin, ns, b.f.n, int32(b.f.resizeTo))
	})
	b.res.Operator.Resize = p
	// After a resize the cache holds more pods and the event broadcaster
	// both phases' events, so the heap is larger than the converge's
	// profile shows; a 64 MiB limit was reached here.
	b.heapProfile(ctx, "resized-heap.pprof")
	return err
}

// cpuProfile starts a CPU profile of the operator that runs for
// -profile-seconds in the background, after the one before it ends, and is
// saved under profiles/ (a failure is logged, as for heapProfile).
func (b *bench) cpuProfile(ctx context.Context, name string) {
	if b.f.profileSeconds <= 0 {
		return
	}
	go func() {
		b.profiling.Lock()
		defer b.profiling.Unlock()
		file := filepath.Join(b.out, "profiles", name)
		_ = os.MkdirAll(filepath.Dir(file), 0o755)
		if err := b.op.profile(ctx, "profile", b.f.profileSeconds, file); err != nil {
			logf("CPU profile: %v", err)
		}
	}()
}

// heapProfile saves the operator's heap profile under profiles/ (a failure
// is logged: a profile is evidence, not a result).
func (b *bench) heapProfile(ctx context.Context, name string) {
	file := filepath.Join(b.out, "profiles", name)
	_ = os.MkdirAll(filepath.Dir(file), 0o755)
	if err := b.op.profile(ctx, "heap", 0, file); err != nil {
		logf("heap profile: %v", err)
	}
}

// reconciled waits until the operator has run at least want more reconciles
// than before and its queue is empty with no worker busy: every fleet enqueued
// by then was checked.
func (b *bench) reconciled(ctx context.Context, before float64, want int, timeout time.Duration) (float64, error) {
	var total float64
	err := pollFor(ctx, "operator reconciles", timeout, func(ctx context.Context) (bool, error) {
		var err error
		if total, err = b.op.metric(ctx, "controller_runtime_reconcile_total", `controller="memcached"`); err != nil {
			return false, nil //nolint:nilerr // the metrics endpoint may not serve yet after a start
		}
		depth, err := b.op.metric(ctx, "workqueue_depth", `name="memcached"`)
		if err != nil {
			return false, nil //nolint:nilerr // as above
		}
		active, err := b.op.metric(ctx, "controller_runtime_active_workers", `controller="memcached"`)
		if err != nil {
			return false, nil //nolint:nilerr // as above
		}
		return total-before >= float64(want) && depth == 0 && active == 0, nil
	})
	return total - before, err
}

// idle forces a reconcile of every fleet (an annotation on each owned
// Service, which the operator watches), then stays idle for the rest of the
// window; the operator must write nothing. Not the Deployments: an
// annotation there bumps the Deployment's metadata.generation (the API
// server's Deployment strategy counts annotation changes), which is a change
// the operator rightly reacts to rather than a resync.
func (b *bench) idle(ctx context.Context, ns string) error {
	logf("operator: idle %s with a forced resync of every fleet", b.f.idle)
	// Start from a quiet operator: nothing queued, no worker busy, so the
	// window does not count the tail of the resize.
	if _, err := b.reconciled(ctx, 0, 0, time.Minute); err != nil {
		return err
	}
	if err := b.audit.skip(ctx); err != nil {
		return err
	}
	before, err := b.op.metric(ctx, "controller_runtime_reconcile_total", `controller="memcached"`)
	if err != nil {
		return err
	}
	cpu0, _ := b.op.stats()
	before0, err := b.watch.statuses(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	stamp := t0.Format(time.RFC3339Nano)
	if err := parallel(ctx, b.f.n, func(ctx context.Context, i int) error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fleetName(i)}}
		patch := client.RawPatch("application/merge-patch+json",
			fmt.Appendf(nil, `{"metadata":{"annotations":{"bench.cache.example.com/resync":%q}}}`, stamp))
		return b.admin.Patch(ctx, svc, patch)
	}); err != nil {
		return err
	}
	recs, err := b.reconciled(ctx, before, b.f.n, convergeTimeout(b.f.n))
	if err != nil {
		return err
	}
	resync := time.Since(t0)
	if rest := b.f.idle - resync; rest > 0 {
		logf("  resync done in %s (%d reconciles); idle for %s more", resync.Round(time.Millisecond), int(recs), rest.Round(time.Second))
		select { // the idle window is the scenario itself, not a wait for a condition
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(rest):
		}
	}
	counts, err := b.audit.window(ctx, userOperator)
	if err != nil {
		return err
	}
	cpu1, _ := b.op.stats()
	after, err := b.watch.statuses(ctx)
	if err != nil {
		return err
	}
	changed := statusChanges(before0, after)
	for i, c := range changed {
		if i == 3 {
			logf("  … %d fleets in all changed status while idle", len(changed))
			break
		}
		logf("  status changed while idle: %s", c)
	}
	b.res.Idle = &idleResult{
		StatusChanged: len(changed), StatusChangeExamples: changed[:min(3, len(changed))],
		Seconds: time.Since(t0).Seconds(), ResyncSeconds: resync.Seconds(), Reconciles: int(recs),
		Requests: counts, CPUSeconds: cpu1.CPUSeconds - cpu0.CPUSeconds,
	}
	logf("  idle: %d writes, %d requests (%s)", counts.Writes, counts.Total, counts)
	return nil
}

// churn deletes a share of the pods at random, round after round, and
// times until every fleet reports its replacement pods again.
func (b *bench) churn(ctx context.Context, ns string) error {
	for round := range b.f.churnRounds {
		pods, err := b.watch.livePods(ctx)
		if err != nil {
			return err
		}
		var all [][2]string
		for inst, names := range pods {
			for _, n := range names {
				all = append(all, [2]string{inst, n})
			}
		}
		rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		victims := all[:max(1, int(float64(len(all))*b.f.churnFraction))]
		fleets := map[string]bool{}
		for _, v := range victims {
			fleets[v[0]] = true
		}
		logf("operator: churn round %d: deleting %d of %d pods (%d fleets)", round+1, len(victims), len(all), len(fleets))
		p, err := b.timedPhase(ctx, b.watch, userOperator, b.f.n, b.f.resizeTo, true, func(ctx context.Context) error {
			if err := parallel(ctx, len(victims), func(ctx context.Context, i int) error {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: victims[i][1]}}
				return client.IgnoreNotFound(b.admin.Delete(ctx, pod))
			}); err != nil {
				return err
			}
			// Judge readiness only once the bench's cache has seen the
			// deletions, or the old status would count as repaired.
			return pollFor(ctx, "bench cache sees the deletions", time.Minute, func(ctx context.Context) (bool, error) {
				live, err := b.watch.livePods(ctx)
				if err != nil {
					return false, err
				}
				for _, v := range victims {
					if slices.Contains(live[v[0]], v[1]) {
						return false, nil
					}
				}
				return true, nil
			})
		})
		if p != nil {
			b.res.Churn = append(b.res.Churn, churnResult{
				Round: round + 1, PodsDeleted: len(victims), FleetsAffected: len(fleets), Seconds: p.Seconds,
				Requests: p.Requests, WritesPerRepairedFleet: float64(p.Requests.Writes) / float64(len(fleets)),
				WritesPerRepairedFleetExclEvents: float64(p.Requests.WritesExclEvents) / float64(len(fleets)),
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// restart stops the operator and times a cold start until every fleet was
// checked; nothing drifted meanwhile, so it must write nothing.
func (b *bench) restart(ctx context.Context, ns string) error {
	logf("operator: restart with %d fleets", b.f.n)
	if err := b.op.stop(); err != nil {
		return err
	}
	if err := b.audit.skip(ctx); err != nil {
		return err
	}
	t0 := time.Now()
	if err := b.op.start(ctx, ns, b.f.workers); err != nil {
		return err
	}
	ready := time.Since(t0)
	recs, err := b.reconciled(ctx, 0, b.f.n, convergeTimeout(b.f.n))
	if err != nil {
		return err
	}
	checked := time.Since(t0)
	counts, err := b.audit.window(ctx, userOperator)
	if err != nil {
		return err
	}
	st, _ := b.op.stats()
	b.res.Restart = &restartResult{
		ReadySeconds: ready.Seconds(), AllCheckedSeconds: checked.Seconds(), Reconciles: int(recs),
		Requests: counts, PeakRSSMiB: st.PeakRSSMiB, CPUSeconds: st.CPUSeconds,
		RSSAnonMiB: st.RSSAnonMiB, RSSFileMiB: st.RSSFileMiB,
	}
	b.heapProfile(ctx, "restarted-heap.pprof")
	logf("  restart: ready in %.2fs, every fleet checked in %.2fs (%d reconciles), %d writes (%s)",
		ready.Seconds(), checked.Seconds(), int(recs), counts.Writes, counts)
	return nil
}

// sweeps draw converge time against workers, against N and against the
// operator's client-side QPS limit, operator and reference alike (the
// reference never limited), each point on a fresh namespace.
func (b *bench) sweeps(ctx context.Context) error {
	point := func(sweep string, n, workers int, qps float64, tag string) error {
		ref, err := b.referenceRun(ctx, "bench-sweep-ref-"+tag, n, workers, false, deploymentFleets, writesCheapest)
		if err != nil {
			return err
		}
		ns := "bench-sweep-op-" + tag
		var extra []string
		if qps > 0 {
			extra = []string{"--kube-api-qps=" + strconv.FormatFloat(qps, 'f', -1, 64)}
		}
		if err := b.operatorConverge(ctx, ns, n, workers, false, deploymentFleets, extra...); err != nil {
			return err
		}
		b.res.Sweep = append(b.res.Sweep, sweepPoint{
			Sweep: sweep, N: n, Workers: workers, QPS: qps, OperatorSeconds: b.sweepOp.Seconds, ReferenceSeconds: ref.Converge.Seconds,
			OperatorWritesPerFleet: b.sweepOp.WritesPerFleet, OperatorPeakRSSMiB: b.sweepOp.PeakRSSMiB,
		})
		if err := b.op.stop(); err != nil {
			return err
		}
		return deleteNamespace(ctx, b.admin, ns, convergeTimeout(n))
	}
	ws, err := intList(b.f.sweepWorkers)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if err := point("workers", b.f.n, w, 0, fmt.Sprintf("w%d", w)); err != nil {
			return err
		}
	}
	ns, err := intList(b.f.sweepN)
	if err != nil {
		return err
	}
	for _, n := range ns {
		if err := point("n", n, b.f.workers, 0, fmt.Sprintf("n%d", n)); err != nil {
			return err
		}
	}
	qs, err := intList(b.f.sweepQPS)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if q < 0 {
			return fmt.Errorf("-sweep-qps: %d is not a limit (0: none)", q)
		}
		if err := point("qps", b.f.n, b.f.workers, float64(q), fmt.Sprintf("q%d", q)); err != nil {
			return err
		}
	}
	return nil
}

// checkAdmissionTurn refuses a rate that is not positive, and a turn in
// which a server at some rate gets no request (zero or negative turns
// included, which would never end a rate's window).
func checkAdmissionTurn(turn time.Duration, rates string) error {
	rs, err := intList(rates)
	if err != nil {
		return fmt.Errorf("-admission-rates %w", err)
	}
	for _, r := range rs {
		if r <= 0 {
			return fmt.Errorf("-admission-rates %q: %d is not a positive rate", rates, r)
		}
		if float64(r)*turn.Seconds() < 1 {
			return fmt.Errorf("-admission-turn %s: a server gets no request in a turn at %d/s", turn, r)
		}
	}
	return nil
}

func intList(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		v, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// machine names where the figures come from.
func machine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(string(data))
		if len(f) > 1 {
			kib, _ := strconv.ParseFloat(f[1], 64)
			mem = fmt.Sprintf(", %.0f GiB RAM", kib/1024/1024)
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return fmt.Sprintf("%d CPUs (%s)%s, Linux %s, %s", runtime.NumCPU(), cpu, mem, strings.TrimSpace(string(kernel)), runtime.Version())
}
