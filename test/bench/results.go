package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// results is results.json.
type results struct {
	Machine   string    `json:"machine"`
	StartedAt time.Time `json:"startedAt"`
	// WallSeconds is the whole `bench run`.
	WallSeconds float64 `json:"wallSeconds"`
	// LoadAverage is /proc/loadavg at the start and at the end: the bench
	// shares the machine with whatever else runs on it.
	LoadAverage []string `json:"loadAverage"`
	Config      struct {
		N, Size, ResizeTo, Workers, Nodes int
		Idle                              string
		ChurnRounds                       int
		ChurnFraction                     float64
		CI                                bool
		KwokPodReady                      string
		OperatorClientQPS                 string
		OperatorMemoryTarget              string
		OperatorMemoryLimit               string `json:",omitempty"`
		OperatorFlags                     string `json:",omitempty"`
		OperatorEnv                       string `json:",omitempty"`
		Order                             string
		// AdmissionTurn is how long each webhook server was loaded in turn.
		AdmissionTurn string `json:",omitempty"`
		StableFleets  bool
		// FreshControlPlane: every turn began on a restarted control plane
		// and a compacted, defragmented etcd.
		FreshControlPlane bool `json:",omitempty"`
		// SecondReference is how the second reference line wrote.
		SecondReference referenceWrites `json:",omitempty"`
	} `json:"config"`
	// Reference is the cheapest client's run (writesCheapest), ApplyReference
	// the same client's through server-side apply (writesApply).
	Reference      *pairResult `json:"reference,omitempty"`
	ApplyReference *pairResult `json:"applyReference,omitempty"`
	Operator       *pairResult `json:"operator,omitempty"`
	// The Again runs are the balanced order's second run of each client.
	OperatorAgain       *pairResult `json:"operatorAgain,omitempty"`
	ApplyReferenceAgain *pairResult `json:"applyReferenceAgain,omitempty"`
	ReferenceAgain      *pairResult `json:"referenceAgain,omitempty"`
	// StableReference and StableOperator converge and resize fleets of
	// stable pods with warm restarts (workload StatefulSet), in that order.
	StableReference *pairResult       `json:"stableReference,omitempty"`
	StableOperator  *pairResult       `json:"stableOperator,omitempty"`
	OperatorProcess *procStats        `json:"operatorProcessAfterConverge,omitempty"`
	Idle            *idleResult       `json:"idle,omitempty"`
	Churn           []churnResult     `json:"churn,omitempty"`
	Restart         *restartResult    `json:"restart,omitempty"`
	Admission       []admissionResult `json:"admission,omitempty"`
	Sweep           []sweepPoint      `json:"sweep,omitempty"`
	Targets         []target          `json:"targets"`

	// OperatorProcessAtStart is the main operator before its converge: its
	// caches synced and empty, the floor the fleets add to.
	OperatorProcessAtStart *procStats `json:"operatorProcessAtStart,omitempty"`
	// CacheCost is what the operator's cache holds a fleet once converged,
	// kind by kind (cacheCost).
	CacheCost []kindCost `json:"cacheCost,omitempty"`
	// StaleWebhookConnRetries counts the fleet writes sent again after a
	// webhook connection the API server found closed (userWrite).
	StaleWebhookConnRetries int64 `json:"staleWebhookConnRetries"`
}

func newResults(f runFlags, s *clusterState) *results {
	r := &results{Machine: machine(), StartedAt: time.Now().UTC(), LoadAverage: []string{loadAvg()}}
	c := &r.Config
	c.N, c.Size, c.ResizeTo, c.Workers, c.Nodes = f.n, f.size, f.resizeTo, f.workers, s.Nodes
	c.Idle, c.ChurnRounds, c.ChurnFraction, c.CI = f.idle.String(), f.churnRounds, f.churnFraction, f.ci
	c.KwokPodReady = "1.0-1.2 s after scheduling (kwok stage pod-ready with delay)"
	c.OperatorClientQPS = "no client-side limit (controller-runtime default QPS -1; the operator has no QPS/burst flags)"
	c.OperatorMemoryTarget = "--memory-target=" + operatorMemoryTarget + " --memory-limit=" + operatorMemoryLimit + " (as the chart with its default 256Mi memory limit)"
	c.OperatorMemoryLimit = f.operatorMemoryLimit
	c.OperatorFlags = f.operatorFlags
	c.OperatorEnv = f.operatorEnv
	c.Order = f.order
	c.AdmissionTurn = f.admissionTurn.String()
	c.SecondReference = f.secondReference
	c.StableFleets = f.stable
	c.FreshControlPlane = f.freshControlPlane
	return r
}

// pairResult is one client's converge (and resize) of N fleets.
type pairResult struct {
	N       int `json:"n"`
	Workers int `json:"workers"`
	// Writes is how a reference wrote (referenceWrites); empty for the operator.
	Writes          string       `json:"writes,omitempty"`
	Converge        *phaseResult `json:"converge,omitempty"`
	Resize          *phaseResult `json:"resize,omitempty"`
	ReferenceErrors int          `json:"referenceErrors,omitempty"`
}

// phaseResult is one timed phase: from the user's first request until the
// last fleet is ready.
type phaseResult struct {
	Seconds           float64 `json:"seconds"`
	UserActionSeconds float64 `json:"userActionSeconds"`
	FleetP50Seconds   float64 `json:"fleetP50Seconds"`
	FleetP99Seconds   float64 `json:"fleetP99Seconds"`
	Fleets            int     `json:"fleets"`
	Converged         int     `json:"converged"`
	// ReadyAt are the seconds after t0 at which each fleet became ready, sorted.
	ReadyAt []float64 `json:"readyAt,omitempty"`
	// StatusLag*: how long after its Deployment had rolled out (size pods
	// of the current generation available) a fleet's status said so.
	StatusLagP50Seconds float64 `json:"statusLagP50Seconds"`
	StatusLagP99Seconds float64 `json:"statusLagP99Seconds"`
	// EndpointsLag*: how long after the rollout the fleet's EndpointSlices
	// listed every pod; StatusAfterEndpoints*: how long after both the
	// status said Ready. StatusLag is about their sum.
	EndpointsLagP50Seconds         float64 `json:"endpointsLagP50Seconds"`
	EndpointsLagP99Seconds         float64 `json:"endpointsLagP99Seconds"`
	StatusAfterEndpointsP50Seconds float64 `json:"statusAfterEndpointsP50Seconds"`
	StatusAfterEndpointsP99Seconds float64 `json:"statusAfterEndpointsP99Seconds"`
	// GenerationLag*: how long after the bench first saw a fleet's new
	// generation its status named it (observedGeneration).
	GenerationLagP50Seconds float64 `json:"generationLagP50Seconds"`
	GenerationLagP99Seconds float64 `json:"generationLagP99Seconds"`
	GenerationLagMaxSeconds float64 `json:"generationLagMaxSeconds"`
	// DeploymentLag*: how long after the client's update of the fleet's
	// Deployment (first seen asking for the new size) the status named the
	// new generation.
	DeploymentLagP50Seconds  float64       `json:"deploymentLagP50Seconds"`
	DeploymentLagP99Seconds  float64       `json:"deploymentLagP99Seconds"`
	DeploymentLagMaxSeconds  float64       `json:"deploymentLagMaxSeconds"`
	Requests                 requestCounts `json:"requests"`
	WritesPerFleet           float64       `json:"writesPerFleet"`
	WritesPerFleetExclEvents float64       `json:"writesPerFleetExclEvents"`
	// ProgressWrites are the operator's status writes that only reported a
	// rollout's progress (memcached_operator_status_writes_total, cause
	// progress): a share of all fleets' writes a second, not a fleet's.
	ProgressWrites     int     `json:"progressWrites,omitempty"`
	CPUSeconds         float64 `json:"cpuSeconds,omitempty"`
	CPUSecondsPerFleet float64 `json:"cpuSecondsPerFleet,omitempty"`
	PeakRSSMiB         float64 `json:"peakRssMiB,omitempty"`
	// APIServerCPUSeconds and EtcdCPUSeconds are what kube-apiserver and
	// etcd spent during the phase: the client under test is the only one
	// writing then, so the difference between clients is their writes'.
	APIServerCPUSeconds float64 `json:"apiServerCpuSeconds,omitempty"`
	EtcdCPUSeconds      float64 `json:"etcdCpuSeconds,omitempty"`
}

type idleResult struct {
	// StatusChanged counts the fleets whose status differs between the start
	// and the end of the window; the examples show before → after.
	StatusChanged        int           `json:"statusChanged"`
	StatusChangeExamples []string      `json:"statusChangeExamples,omitempty"`
	Seconds              float64       `json:"seconds"`
	ResyncSeconds        float64       `json:"resyncSeconds"`
	Reconciles           int           `json:"reconciles"`
	Requests             requestCounts `json:"requests"`
	CPUSeconds           float64       `json:"cpuSeconds"`
}

type churnResult struct {
	Round                            int           `json:"round"`
	PodsDeleted                      int           `json:"podsDeleted"`
	FleetsAffected                   int           `json:"fleetsAffected"`
	Seconds                          float64       `json:"seconds"`
	Requests                         requestCounts `json:"requests"`
	WritesPerRepairedFleet           float64       `json:"writesPerRepairedFleet"`
	WritesPerRepairedFleetExclEvents float64       `json:"writesPerRepairedFleetExclEvents"`
}

type restartResult struct {
	ReadySeconds      float64       `json:"readySeconds"`
	AllCheckedSeconds float64       `json:"allCheckedSeconds"`
	Reconciles        int           `json:"reconciles"`
	Requests          requestCounts `json:"requests"`
	PeakRSSMiB        float64       `json:"peakRssMiB"`
	CPUSeconds        float64       `json:"cpuSeconds"`
	// RSSAnonMiB and RSSFileMiB split the RSS once every fleet was checked.
	RSSAnonMiB float64 `json:"rssAnonMiB,omitempty"`
	RSSFileMiB float64 `json:"rssFileMiB,omitempty"`
}

type sweepPoint struct {
	// Sweep is "workers", "n" or "qps": the curve the point belongs to.
	Sweep   string `json:"sweep"`
	N       int    `json:"n"`
	Workers int    `json:"workers"`
	// QPS is the operator's --kube-api-qps (0: no client-side limit).
	QPS                    float64 `json:"qps"`
	OperatorSeconds        float64 `json:"operatorSeconds"`
	ReferenceSeconds       float64 `json:"referenceSeconds"`
	OperatorWritesPerFleet float64 `json:"operatorWritesPerFleet"`
	OperatorPeakRSSMiB     float64 `json:"operatorPeakRssMiB"`
}

// ratioTargetN is the fleet count at which the issue sets the converge,
// resize and API server CPU ratios to the cheapest client.
const ratioTargetN = 1000

// target is one line of the targets. Met is nil for figures that
// are only reported, for every timing in CI mode, and for the ratios set at
// ratioTargetN in a smaller run.
type target struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Limit string `json:"limit"`
	Met   *bool  `json:"met,omitempty"`
	// Correctness marks the checks the CI-sized run enforces.
	Correctness bool   `json:"correctness,omitempty"`
	Note        string `json:"note,omitempty"`
}

func check(ok bool) *bool { return &ok }

// perFleet prints a count per fleet in full, so that a figure judged
// against a limit never reads as the limit itself (5.002 is not 5.00).
func perFleet(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// rssNote splits the converge's RSS, gives the floor at no fleet, and
// the peak of the cold start with every fleet (the restart, which comes
// after the resize, so with -resize-to pods a fleet).
func (r *results) rssNote() string {
	var notes []string
	if p := r.OperatorProcess; p != nil {
		notes = append(notes, fmt.Sprintf("after converge: RSS %.1f MiB = %.1f anonymous (heap, stacks) + %.1f file (binary)", p.RSSMiB, p.RSSAnonMiB, p.RSSFileMiB))
		if s := r.OperatorProcessAtStart; s != nil && r.Config.N > 0 {
			notes = append(notes, fmt.Sprintf("at 0 fleets: %.1f MiB = %.1f anonymous + %.1f file, so %.1f KiB anonymous a fleet",
				s.RSSMiB, s.RSSAnonMiB, s.RSSFileMiB, (p.RSSAnonMiB-s.RSSAnonMiB)*1024/float64(r.Config.N)))
		}
	}
	if rs := r.Restart; rs != nil && rs.PeakRSSMiB > 0 {
		notes = append(notes, fmt.Sprintf("cold start with %d pods (restart): peak %.1f MiB, %.1f anonymous + %.1f file once every fleet was checked",
			r.Config.N*r.Config.ResizeTo, rs.PeakRSSMiB, rs.RSSAnonMiB, rs.RSSFileMiB))
	}
	return strings.Join(notes, "; ")
}

// progressNote says how many of a phase's status writes only reported
// progress, and at what rate: they share --status-progress-rate over all
// fleets, so they are judged as a rate, not a fleet's share.
func progressNote(p *phaseResult) string {
	if p.Seconds <= 0 {
		return fmt.Sprintf("%d progress reports", p.ProgressWrites)
	}
	return fmt.Sprintf("%d progress reports (%.2f a second over %.0fs, all fleets together)", p.ProgressWrites, float64(p.ProgressWrites)/p.Seconds, p.Seconds)
}

// evaluate fills Targets from the measurements.
func (r *results) evaluate() {
	r.Targets = nil
	add := func(t target) { r.Targets = append(r.Targets, t) }
	atN := fmt.Sprintf("at N=%d", r.Config.N)
	timing := func(ok bool) *bool {
		if r.Config.CI {
			return nil
		}
		return check(ok)
	}
	// The issue sets the time and API server CPU ratios at N=1000; below
	// it a turn lasts seconds and the machine's drift moves a run's ratio
	// by more than a target's margin, so those ratios are printed beside
	// the limit, not judged.
	ratioLimit, atScale := func(limit string) string { return limit }, timing
	if r.Config.N < ratioTargetN {
		ratioLimit = func(limit string) string { return fmt.Sprintf("%s at N=%d", limit, ratioTargetN) }
		atScale = func(bool) *bool { return nil }
	}
	if r.Operator != nil && r.Operator.Converge != nil {
		op := r.Operator.Converge
		add(target{Name: "every fleet converges (operator)", Value: fmt.Sprintf("%d/%d", op.Converged, op.Fleets),
			Limit: "all", Met: check(op.Converged == op.Fleets), Correctness: true})
		if value, ratio, ok := r.timeRatio(convergeOf); ok {
			add(target{Name: "converge time / cheapest client " + atN, Value: value,
				Limit: ratioLimit("≤ 1.3"), Met: atScale(ratio <= 1.3),
				Note: lagNote(op, r.Reference.Converge)})
		}
		r.evaluateCost(add, "converge", convergeOf, ratioLimit, atScale)
		// Rounded: a difference of two fractions would print as 5.0200000000000005.
		perFleetBesidesProgress := math.Round((op.WritesPerFleetExclEvents-float64(op.ProgressWrites)/float64(op.Fleets))*1e6) / 1e6
		add(target{Name: "writes per fleet, converge (applies + status)", Value: perFleet(op.WritesPerFleetExclEvents),
			Limit: "≤ 5 besides progress reports", Met: check(perFleetBesidesProgress <= 5),
			Note: fmt.Sprintf("%s besides %s; %.2f with events; reference %s", perFleet(perFleetBesidesProgress),
				progressNote(op), op.WritesPerFleet, refWrites(r.Reference, true))})
		add(target{Name: "peak RSS " + atN + fmt.Sprintf(" (%d pods)", r.Config.N*r.Config.Size), Value: fmt.Sprintf("%.1f MiB", op.PeakRSSMiB),
			Limit: "≤ 80 MiB at N=1000", Met: timing(op.PeakRSSMiB <= 80), Note: r.rssNote()})
		if len(r.CacheCost) > 0 {
			add(target{Name: "cached objects a fleet, decoded and trimmed, by kind", Value: cacheCostNote(r.CacheCost), Limit: "reported"})
		}
		if p := r.OperatorProcess; p != nil && p.Memcg != nil {
			m := p.Memcg
			add(target{Name: fmt.Sprintf("under a %.0f MiB memory limit (cgroup)", m.LimitMiB), Limit: "reported",
				Value: fmt.Sprintf("peak charged %.1f MiB, working set %.1f MiB, %d OOM kills, %d major faults", m.PeakMiB, m.WorkingSetMiB, m.OOMKills, p.MajorFaults),
				Note:  "working set = usage - inactive file pages, as the kubelet counts it; page cache is charged to the cgroup that first read it, so the binary's pages count only when the cgroup loaded them (a fresh container does)"})
		}
		add(target{Name: "CPU seconds per fleet, converge", Value: fmt.Sprintf("%.4f (%.1fs total)", op.CPUSecondsPerFleet, op.CPUSeconds), Limit: "reported"})
	}
	if r.Operator != nil && r.Operator.Resize != nil {
		op := r.Operator.Resize
		add(target{Name: "every fleet resized (operator)", Value: fmt.Sprintf("%d/%d", op.Converged, op.Fleets),
			Limit: "all", Met: check(op.Converged == op.Fleets), Correctness: true})
		if value, ratio, ok := r.timeRatio(resizeOf); ok {
			add(target{Name: "resize time / cheapest client " + atN, Value: value,
				Limit: ratioLimit("≤ 1.3"), Met: atScale(ratio <= 1.3),
				Note: fmt.Sprintf("writes/fleet %.2f (%.2f with events; %s); reference %s; %s",
					op.WritesPerFleetExclEvents, op.WritesPerFleet, progressNote(op), refWrites(r.Reference, false), lagNote(op, r.Reference.Resize))})
		}
		r.evaluateCost(add, "resize", resizeOf, ratioLimit, atScale)
	}
	r.evaluateStable(add)
	if r.Idle != nil {
		add(target{Name: "idle writes (forced resync of every fleet)", Value: fmt.Sprintf("%d in %.0fs, %d reconciles", r.Idle.Requests.Writes, r.Idle.Seconds, r.Idle.Reconciles),
			Limit: "0", Met: check(r.Idle.Requests.Writes == 0), Correctness: true,
			Note: fmt.Sprintf("%s; %d fleets changed status", r.Idle.Requests, r.Idle.StatusChanged)})
	}
	for _, c := range r.Churn {
		add(target{Name: fmt.Sprintf("churn round %d: %d pods of %d fleets", c.Round, c.PodsDeleted, c.FleetsAffected),
			Value: fmt.Sprintf("restored in %.1fs, %.2f writes/repaired fleet (%.2f excl. events)", c.Seconds, c.WritesPerRepairedFleet, c.WritesPerRepairedFleetExclEvents),
			Limit: "reported"})
	}
	if r.Restart != nil {
		add(target{Name: "restart: time to every fleet checked " + atN, Value: fmt.Sprintf("%.2fs (ready %.2fs)", r.Restart.AllCheckedSeconds, r.Restart.ReadySeconds), Limit: "reported"})
		add(target{Name: "restart writes", Value: fmt.Sprint(r.Restart.Requests.Writes), Limit: "0",
			Met: check(r.Restart.Requests.Writes == 0), Correctness: true})
		// The restart comes after the resize, so its caches hold as many
		// pods as the running operator's did through the resize: the peak
		// of that run is the steady state it is held to.
		if rz := r.Operator; rz != nil && rz.Resize != nil && rz.Resize.PeakRSSMiB > 0 && r.Restart.PeakRSSMiB > 0 {
			ratio := r.Restart.PeakRSSMiB / rz.Resize.PeakRSSMiB
			add(target{Name: fmt.Sprintf("restart peak RSS / running peak with %d pods", r.Config.N*r.Config.ResizeTo),
				Value: fmt.Sprintf("%.2f (%.1f / %.1f MiB)", ratio, r.Restart.PeakRSSMiB, rz.Resize.PeakRSSMiB),
				Limit: "≤ 1.3", Met: timing(ratio <= 1.3)})
		}
	}
	for _, a := range r.Admission {
		if a.Rate == 200 && a.Path == pathDirect {
			add(webhookTarget(r.Admission, a, timing))
		}
		if a.Rate == 200 && a.Path == pathFloorCopy {
			if t, ok := floorSpread(r.Admission, a); ok {
				add(t)
			}
		}
		if a.Rate == 200 && a.Path == pathDryRun {
			add(target{Name: "admission p99 at 200/s, dry-run create via API server", Value: fmt.Sprintf("%.2f ms", a.P99Ms), Limit: "reported",
				Note: "end to end: API server, mutating and validating webhook calls; API server's histogram: " + histNote(a.APIServerWebhookCalls)})
		}
		if a.Rate >= 1000 {
			add(target{Name: fmt.Sprintf("admission errors at %d/s, %s", a.Rate, a.Path), Value: fmt.Sprintf("%d of %d", a.Errors, a.Requests),
				Limit: "0", Met: check(a.Errors == 0), Correctness: true})
		}
	}
	add(target{Name: "fleet creates and resizes sent again (API server's webhook call met a closed connection)",
		Value: strconv.FormatInt(r.StaleWebhookConnRetries, 10), Limit: "reported"})
}

// webhookTarget judges the webhook's p99 against the cheapest webhook's in
// the same turns, as every other figure is judged against the cheapest
// client: the p99 of a webhook that does nothing moves by milliseconds
// between runs with what else the machine does, so a bound in milliseconds
// would judge the machine. Without the cheapest webhook's figure the p99 is
// only reported.
func webhookTarget(all []admissionResult, a admissionResult, timing func(bool) *bool) target {
	t := target{Name: "admission p99 at 200/s: webhook endpoint / cheapest webhook", Value: fmt.Sprintf("%.2f ms", a.P99Ms),
		Limit: "reported", Note: floorNote(all, a)}
	floor, copies := floorP99(all, a)
	if floor == 0 {
		return t
	}
	ratio := a.P99Ms / floor
	t.Value = fmt.Sprintf("%.2f (%.2f / %.2f ms)", ratio, a.P99Ms, floor)
	if len(copies) > 1 {
		t.Value = fmt.Sprintf("%.2f (%.2f / %.2f ms, the mean of %.2f and %.2f)", ratio, a.P99Ms, floor, copies[0], copies[1])
	}
	t.Limit, t.Met = "≤ 1.5", timing(ratio <= 1.5)
	return t
}

// floorP99 is the cheapest webhook's p99 in a's turns: the mean of its copies',
// which measure the same nothing, so that the mean halves what chance adds
// to a ratio's denominator; 0 when none was measured.
func floorP99(all []admissionResult, a admissionResult) (float64, []float64) {
	var copies []float64
	for _, path := range []string{pathFloor, pathFloorCopy} {
		for _, f := range all {
			if f.Path == path && sameStep(f, a) && f.P99Ms > 0 {
				copies = append(copies, f.P99Ms)
			}
		}
	}
	if len(copies) == 0 {
		return 0, nil
	}
	sum := 0.0
	for _, c := range copies {
		sum += c
	}
	return sum / float64(len(copies)), copies
}

// sameStep says whether two results were measured in the same turns: the
// same rate, and the same step when a rate is measured more than once.
func sameStep(a, b admissionResult) bool { return a.Rate == b.Rate && a.Step == b.Step }

// floorSpread reports the cheapest webhook's p99 over its second copy's in
// the same turns: two processes doing the same nothing, so how far from 1.0
// it lands is how much of a webhook ratio this run can owe to chance.
func floorSpread(all []admissionResult, c admissionResult) (target, bool) {
	for _, f := range all {
		if f.Path == pathFloor && sameStep(f, c) && f.P99Ms > 0 && c.P99Ms > 0 {
			return target{Name: "admission p99 at 200/s: cheapest webhook / its second copy",
				Value: fmt.Sprintf("%.2f (%.2f / %.2f ms)", f.P99Ms/c.P99Ms, f.P99Ms, c.P99Ms), Limit: "reported",
				Note: "the same server twice in the same turns: a webhook ratio this far from 1.0 is chance"}, true
		}
	}
	return target{}, false
}

// floorNote sets a webhook latency beside the cheapest webhook's at the
// same rate in the same run, which is what the machine itself costs.
func floorNote(all []admissionResult, a admissionResult) string {
	note := ""
	if floor, _ := floorP99(all, a); floor > 0 {
		for _, f := range all {
			if f.Path == pathFloor && sameStep(f, a) {
				note = fmt.Sprintf("cheapest webhook %.2f ms, p50 %.2f against %.2f ms: %.2f × its p99", floor, a.P50Ms, f.P50Ms, a.P99Ms/floor)
			}
		}
	}
	for _, h := range all {
		if note != "" && h.Path == pathServer && sameStep(h, a) && h.P99Ms > 0 {
			note += fmt.Sprintf("; a fixed answer on controller-runtime's server %.2f ms (p50 %.2f)", h.P99Ms, h.P50Ms)
		}
	}
	for _, h := range all {
		if note != "" && h.Path == pathHandlers && sameStep(h, a) && h.P99Ms > 0 {
			note += fmt.Sprintf("; the operator's handlers alone %.2f ms (p50 %.2f)", h.P99Ms, h.P50Ms)
		}
	}
	if c := a.Collector; note != "" && c != nil {
		note += fmt.Sprintf("; the operator's garbage collector ran %d times in the step, %.0f CPU ms", c.Cycles, c.CPUSeconds*1000)
	}
	return note
}

// evaluateCost adds a phase's API server CPU (operator over the cheapest
// client), and what server-side apply costs the same client (apply over
// cheapest, in time and in API server CPU), or with -second-reference
// prompt what naming each new generation at once costs it.
func (r *results) evaluateCost(add func(target), name string, phase func(*pairResult) *phaseResult, limit func(string) string, atScale func(bool) *bool) {
	if value, ratio, ok := r.ratio(phase, apiServerSeconds, " CPU s", r.Operator, r.OperatorAgain, r.Reference, r.ReferenceAgain); ok {
		add(target{Name: "API server CPU, " + name + ": operator / cheapest client", Value: value,
			Limit: limit("≤ 1.5"), Met: atScale(ratio <= 1.5), Note: etcdNote(phase, r.Operator, r.Reference)})
	}
	second := r.Config.SecondReference.client()
	if value, _, ok := r.ratio(phase, seconds, "s", r.ApplyReference, r.ApplyReferenceAgain, r.Reference, r.ReferenceAgain); ok {
		add(target{Name: name + " time: " + second + " / cheapest client", Value: value, Limit: "reported",
			Note: "writes/fleet " + refWrites(r.ApplyReference, name == "converge") + " against " + refWrites(r.Reference, name == "converge")})
	}
	if value, _, ok := r.ratio(phase, apiServerSeconds, " CPU s", r.ApplyReference, r.ApplyReferenceAgain, r.Reference, r.ReferenceAgain); ok {
		add(target{Name: "API server CPU, " + name + ": " + second + " / cheapest client", Value: value, Limit: "reported"})
	}
}

// etcdNote gives etcd's CPU in a phase beside the API server's, for the
// first runs of two clients.
func etcdNote(phase func(*pairResult) *phaseResult, a, b *pairResult) string {
	if a == nil || b == nil || phase(a) == nil || phase(b) == nil {
		return ""
	}
	return fmt.Sprintf("etcd %.1f against %.1f CPU s", phase(a).EtcdCPUSeconds, phase(b).EtcdCPUSeconds)
}

// evaluateStable adds the stable fleets' rows: their converge and resize
// against the reference's of the same fleets, beside the Deployment fleets'
// ratio. One order only (reference first), so the ratio carries what running
// second costs (see orderBalanced).
func (r *results) evaluateStable(add func(target)) {
	op, ref := r.StableOperator, r.StableReference
	if op == nil {
		return
	}
	for _, ph := range []struct {
		name string
		of   func(*pairResult) *phaseResult
	}{{"converge", convergeOf}, {"resize", resizeOf}} {
		p := ph.of(op)
		if p == nil {
			continue
		}
		add(target{Name: fmt.Sprintf("every stable fleet %s (operator)", map[string]string{"converge": "converges", "resize": "resized"}[ph.name]),
			Value: fmt.Sprintf("%d/%d", p.Converged, p.Fleets), Limit: "all", Met: check(p.Converged == p.Fleets), Correctness: true})
		if ref == nil || ph.of(ref) == nil {
			continue
		}
		rp := ph.of(ref)
		note := fmt.Sprintf("writes/fleet %.2f, reference %.2f (excl. events); reference first", p.WritesPerFleetExclEvents, rp.WritesPerFleetExclEvents)
		if _, ratio, ok := r.timeRatio(ph.of); ok {
			note += fmt.Sprintf("; Deployment fleets %.2f", ratio)
		}
		add(target{Name: fmt.Sprintf("%s time / reference, stable fleets with warm restarts", ph.name),
			Value: fmt.Sprintf("%.1fs / %.1fs = %.2f", p.Seconds, rp.Seconds, p.Seconds/rp.Seconds), Limit: "reported", Note: note})
	}
}

func convergeOf(p *pairResult) *phaseResult { return p.Converge }
func resizeOf(p *pairResult) *phaseResult   { return p.Resize }

// timeRatio is the operator's time over the cheapest client's in one phase.
func (r *results) timeRatio(phase func(*pairResult) *phaseResult) (value string, ratio float64, ok bool) {
	return r.ratio(phase, seconds, "s", r.Operator, r.OperatorAgain, r.Reference, r.ReferenceAgain)
}

func seconds(p *phaseResult) float64          { return p.Seconds }
func apiServerSeconds(p *phaseResult) float64 { return p.APIServerCPUSeconds }

// ratio is client a's measure over client b's in one phase (each given by
// its runs, the second nil unless the order is balanced). With both runs of
// both it is the ratio of the means, and the value also gives each pair's
// own: b first (the earlier runs) and b last.
func (r *results) ratio(phase func(*pairResult) *phaseResult, measure func(*phaseResult) float64, unit string, a, a2, b, b2 *pairResult) (value string, ratio float64, ok bool) {
	of := func(p *pairResult) *phaseResult {
		if p == nil {
			return nil
		}
		return phase(p)
	}
	x, y := of(a), of(b)
	if x == nil || y == nil || measure(y) == 0 {
		return "", 0, false
	}
	x2, y2 := of(a2), of(b2)
	if x2 == nil || y2 == nil || measure(y2) == 0 {
		ratio = measure(x) / measure(y)
		value = fmt.Sprintf("%.1f%s / %.1f%s = %.2f", measure(x), unit, measure(y), unit, ratio)
		if r.Config.Order == orderBalanced {
			// A run that stopped before its second pair: say the ratio is
			// one order's, under a header that names both.
			value = "reference first only (the second pair did not finish): " + value
		}
		return value, ratio, true
	}
	xMean, yMean := (measure(x)+measure(x2))/2, (measure(y)+measure(y2))/2
	ratio = xMean / yMean
	f := func(v float64) string { return fmt.Sprintf("%.1f%s", v, unit) }
	return fmt.Sprintf("mean %s / %s = %.2f; reference first %s / %s = %.2f, reference last %s / %s = %.2f",
		f(xMean), f(yMean), ratio, f(measure(x)), f(measure(y)), measure(x)/measure(y), f(measure(x2)), f(measure(y2)), measure(x2)/measure(y2)), ratio, true
}

func refWrites(ref *pairResult, converge bool) string {
	if ref == nil {
		return "n/a"
	}
	p := ref.Resize
	if converge {
		p = ref.Converge
	}
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", p.WritesPerFleet)
}

// failedChecks lists the targets not met; in CI mode only the correctness
// checks count.
func (r *results) failedChecks(ci bool) []string {
	var out []string
	for _, t := range r.Targets {
		if t.Met != nil && !*t.Met && (!ci || t.Correctness) {
			out = append(out, t.Name+": "+t.Value)
		}
	}
	return out
}

// table is the summary printed on stdout (and copied into docs/bench/ by make bench-docs).
func (r *results) table() string {
	var sb strings.Builder
	order := map[string]string{
		orderBalanced:      "balanced order (reference, operator, operator, reference)",
		orderReferenceLast: "reference last",
	}[r.Config.Order]
	if order == "" {
		order = "reference first"
	}
	if r.Config.FreshControlPlane {
		order += ", each turn on a fresh control plane"
	}
	fmt.Fprintf(&sb, "memcached-operator bench: N=%d fleets × %d pods, %d workers, %d kwok nodes, %s; %s; load average at start/end %s\n\n",
		r.Config.N, r.Config.Size, r.Config.Workers, r.Config.Nodes, order, r.Machine, strings.Join(r.LoadAverage, " / "))
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "| measure\t| value\t| target\t| met\t|")
	_, _ = fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|")
	for _, t := range r.Targets {
		met := "–"
		if t.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*t.Met]
		}
		v := t.Value
		if t.Note != "" {
			v += " (" + t.Note + ")"
		}
		_, _ = fmt.Fprintf(tw, "| %s\t| %s\t| %s\t| %s\t|\n", t.Name, v, t.Limit, met)
	}
	_ = tw.Flush()
	if len(r.Admission) > 0 {
		sb.WriteString("\n")
		tw = tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "| admission path\t| rate/s\t| achieved/s\t| requests\t| errors\t| p50 ms\t| p95 ms\t| p99 ms\t| max ms\t|")
		_, _ = fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
		for _, a := range r.Admission {
			_, _ = fmt.Fprintf(tw, "| %s\t| %d\t| %.0f\t| %d\t| %d\t| %.2f\t| %.2f\t| %.2f\t| %.2f\t|\n",
				a.Path, a.Rate, a.AchievedRate, a.Requests, a.Errors, a.P50Ms, a.P95Ms, a.P99Ms, a.MaxMs)
		}
		_ = tw.Flush()
	}
	if len(r.Sweep) > 0 {
		sb.WriteString("\n")
		tw = tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
		_, _ = fmt.Fprintln(tw, "| N\t| workers\t| client QPS\t| operator s\t| reference s\t| ratio\t| writes/fleet\t| peak RSS MiB\t|")
		_, _ = fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
		for _, p := range r.Sweep {
			qps := "no limit"
			if p.QPS > 0 {
				qps = strconv.FormatFloat(p.QPS, 'f', -1, 64)
			}
			_, _ = fmt.Fprintf(tw, "| %d\t| %d\t| %s\t| %.1f\t| %.1f\t| %.2f\t| %.2f\t| %.1f\t|\n", p.N, p.Workers, qps, p.OperatorSeconds,
				p.ReferenceSeconds, p.OperatorSeconds/p.ReferenceSeconds, p.OperatorWritesPerFleet, p.OperatorPeakRSSMiB)
		}
		_ = tw.Flush()
	}
	return sb.String()
}

// report evaluates the targets and writes the table, results.json and plots.
func (b *bench) report() error {
	r := b.res
	r.WallSeconds = time.Since(b.wallT0).Seconds()
	r.LoadAverage = append(r.LoadAverage[:1], loadAvg())
	r.StaleWebhookConnRetries = staleWebhookConnRetries.Load()
	r.evaluate()
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.out, "results.json"), data, 0o644); err != nil {
		return err
	}
	table := r.table()
	if err := os.WriteFile(filepath.Join(b.out, "results.md"), []byte(table), 0o644); err != nil {
		return err
	}
	fmt.Print("\n" + table)
	if err := plots(r, b.out); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	logf("results: %s, %s, plots in %s (bench run took %s)", filepath.Join(b.out, "results.json"),
		filepath.Join(b.out, "results.md"), b.out, time.Duration(r.WallSeconds*float64(time.Second)).Round(time.Second))
	return nil
}

func histNote(m map[string]string) string {
	if len(m) == 0 {
		return "n/a"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, strings.SplitN(k, ".", 2)[0]+" "+m[k])
	}
	return strings.Join(parts, ", ")
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// lagNote splits the time from a fleet's rollout to its status saying Ready
// into the EndpointSlices' part and the client's own, p50/p99, for the
// operator and the reference.
func lagNote(op, ref *phaseResult) string {
	return fmt.Sprintf("status naming the new generation after p50/p99/max %.2fs/%.2fs/%.2fs (reference %.2fs/%.2fs/%.2fs), after the Deployment's update %.2fs/%.2fs/%.2fs (reference %.2fs/%.2fs/%.2fs); ",
		op.GenerationLagP50Seconds, op.GenerationLagP99Seconds, op.GenerationLagMaxSeconds,
		ref.GenerationLagP50Seconds, ref.GenerationLagP99Seconds, ref.GenerationLagMaxSeconds,
		op.DeploymentLagP50Seconds, op.DeploymentLagP99Seconds, op.DeploymentLagMaxSeconds,
		ref.DeploymentLagP50Seconds, ref.DeploymentLagP99Seconds, ref.DeploymentLagMaxSeconds) + fmt.Sprintf("status behind the rollout p50/p99 %.2fs/%.2fs (reference %.2fs/%.2fs); of which EndpointSlices listing the pods %.2fs/%.2fs (reference's run %.2fs/%.2fs), then status %.2fs/%.2fs (reference %.2fs/%.2fs)",
		op.StatusLagP50Seconds, op.StatusLagP99Seconds, ref.StatusLagP50Seconds, ref.StatusLagP99Seconds,
		op.EndpointsLagP50Seconds, op.EndpointsLagP99Seconds, ref.EndpointsLagP50Seconds, ref.EndpointsLagP99Seconds,
		op.StatusAfterEndpointsP50Seconds, op.StatusAfterEndpointsP99Seconds, ref.StatusAfterEndpointsP50Seconds, ref.StatusAfterEndpointsP99Seconds)
}
