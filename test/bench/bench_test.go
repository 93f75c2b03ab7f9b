package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/policy"
)

func TestRequestCounts(t *testing.T) {
	g := NewWithT(t)
	lines := []string{
		`{"stage":"ResponseComplete","verb":"patch","user":{"username":"memcached-operator"},"objectRef":{"resource":"deployments","name":"a"},"responseStatus":{"code":200}}`,
		`{"stage":"ResponseComplete","verb":"patch","user":{"username":"memcached-operator"},"objectRef":{"resource":"memcacheds","subresource":"status","name":"a"},"responseStatus":{"code":409}}`,
		`{"stage":"ResponseComplete","verb":"create","user":{"username":"memcached-operator"},"objectRef":{"resource":"events"},"responseStatus":{"code":201}}`,
		`{"stage":"ResponseStarted","verb":"watch","user":{"username":"memcached-operator"},"objectRef":{"resource":"pods"}}`,
		`{"stage":"ResponseComplete","verb":"watch","user":{"username":"memcached-operator"},"objectRef":{"resource":"pods"}}`,
		`{"stage":"ResponseComplete","verb":"list","user":{"username":"memcached-operator"},"objectRef":{"resource":"pods"}}`,
	}
	c := newRequestCounts()
	for _, l := range lines {
		var ev auditEvent
		g.Expect(json.Unmarshal([]byte(l), &ev)).To(Succeed())
		c.add(&ev)
	}
	g.Expect(c.Total).To(Equal(5))
	g.Expect(c.Writes).To(Equal(3))
	g.Expect(c.WritesExclEvents).To(Equal(2))
	g.Expect(c.FailedWrites).To(Equal(1))
	g.Expect(c.ByVerb).To(Equal(map[string]int{"patch": 2, "create": 1, "watch": 1, "list": 1}))
	g.Expect(c.String()).To(Equal("create events=1, patch deployments=1, patch memcacheds/status=1"))
}

func TestFleetReady(t *testing.T) {
	ready := func() *cachev1alpha1.Memcached {
		return &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
			Status: cachev1alpha1.MemcachedStatus{
				ObservedGeneration: 2, ReadyReplicas: 2, Nodes: []string{"a", "b"},
				Conditions: []metav1.Condition{{Type: cachev1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 2}},
			},
		}
	}
	for name, tc := range map[string]struct {
		mutate func(*cachev1alpha1.Memcached)
		pods   []string
		want   bool
	}{
		"ready":                  {want: true},
		"ready, same live pods":  {pods: []string{"b", "a"}, want: true},
		"live pods differ":       {pods: []string{"a", "c"}},
		"old generation":         {mutate: func(m *cachev1alpha1.Memcached) { m.Generation = 3 }},
		"condition of old spec":  {mutate: func(m *cachev1alpha1.Memcached) { m.Status.Conditions[0].ObservedGeneration = 1 }},
		"not ready":              {mutate: func(m *cachev1alpha1.Memcached) { m.Status.Conditions[0].Status = metav1.ConditionFalse }},
		"nodes incomplete":       {mutate: func(m *cachev1alpha1.Memcached) { m.Status.Nodes = []string{"a"} }},
		"ready replicas missing": {mutate: func(m *cachev1alpha1.Memcached) { m.Status.ReadyReplicas = 1 }},
		"spec not yet resized":   {mutate: func(m *cachev1alpha1.Memcached) { m.Spec.Size = ptr.To[int32](1) }},
	} {
		t.Run(name, func(t *testing.T) {
			mc := ready()
			if tc.mutate != nil {
				tc.mutate(mc)
			}
			NewWithT(t).Expect(fleetReady(mc, 2, tc.pods)).To(Equal(tc.want))
		})
	}
}

func TestIntList(t *testing.T) {
	g := NewWithT(t)
	g.Expect(intList(" 1, 2,,16 ")).To(Equal([]int{1, 2, 16}))
	g.Expect(intList("")).To(BeEmpty())
	_, err := intList("x")
	g.Expect(err).To(HaveOccurred())
}

// TestMemoryTargetIsTheCharts: the bench runs the operator as the chart's
// defaults would, heap target included.
func TestMemoryTargetIsTheCharts(t *testing.T) {
	g := NewWithT(t)
	raw, err := os.ReadFile("../../charts/memcached-operator/values.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var values struct {
		Resources struct {
			Limits map[string]string `json:"limits"`
		} `json:"resources"`
	}
	g.Expect(yaml.Unmarshal(raw, &values)).To(Succeed())
	g.Expect(values.Resources.Limits).To(HaveKeyWithValue("memory", operatorMemoryLimit))
	tmpl, err := os.ReadFile("../../charts/memcached-operator/templates/deployment.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(tmpl)).To(ContainSubstring("--memory-target=" + operatorMemoryTarget + "\n"))
}

// TestTableNamesTheOrder: the order of the two clients moves the ratio
// (docs/performance.md), so a table never leaves it out.
func TestTableNamesTheOrder(t *testing.T) {
	g := NewWithT(t)
	for order, want := range map[string]string{
		orderReferenceFirst: "reference first", orderReferenceLast: "reference last",
		orderBalanced: "balanced order (reference, operator, operator, reference)",
	} {
		var r results
		r.Config.N, r.Config.Order = 10, order
		g.Expect(r.table()).To(ContainSubstring(", "+want+";"), order)
	}
}

// TestTurns: each order runs the three clients, and balanced runs each
// twice in mirrored places, so the sums of their places are equal.
func TestTurns(t *testing.T) {
	g := NewWithT(t)
	g.Expect(turns(orderReferenceFirst)).To(Equal([]turn{turnReference, turnApplyReference, turnOperator}))
	g.Expect(turns(orderReferenceLast)).To(Equal([]turn{turnOperator, turnApplyReference, turnReference}))
	g.Expect(turns(orderBalanced)).To(Equal([]turn{turnReference, turnApplyReference, turnOperator, turnOperatorAgain, turnApplyReferenceAgain, turnReferenceAgain}))
}

// TestBalancedRatioIsOfTheMeans: with both orders run, the targets judge
// the ratio of the mean times, not the first pair, and show each order's.
func TestBalancedRatioIsOfTheMeans(t *testing.T) {
	g := NewWithT(t)
	run := func(converge, resize float64) *pairResult {
		return &pairResult{N: 10, Converge: &phaseResult{Seconds: converge, Fleets: 10, Converged: 10}, Resize: &phaseResult{Seconds: resize, Fleets: 10, Converged: 10}}
	}
	var r results
	r.Config.N, r.Config.Order = 1000, orderBalanced
	// Whoever runs second is slower: the first pair alone says 1.50 on converge.
	r.Reference, r.Operator, r.OperatorAgain, r.ReferenceAgain = run(10, 10), run(15, 12), run(10, 10), run(14, 14)
	r.evaluate()
	byName := map[string]target{}
	for _, tg := range r.Targets {
		byName[tg.Name] = tg
	}
	conv := byName["converge time / cheapest client at N=1000"]
	g.Expect(conv.Value).To(HavePrefix("mean 12.5s / 12.0s = 1.04; reference first 15.0s / 10.0s = 1.50, reference last 10.0s / 14.0s = 0.71"))
	g.Expect(conv.Met).To(HaveValue(BeTrue()))
	resize := byName["resize time / cheapest client at N=1000"]
	g.Expect(resize.Value).To(HavePrefix("mean 11.0s / 12.0s = 0.92"))

	r.OperatorAgain.Converge.Seconds = 20 // (15+20)/2 / 12 = 1.46
	r.evaluate()
	for _, tg := range r.Targets {
		if tg.Name == "converge time / cheapest client at N=1000" {
			g.Expect(tg.Met).To(HaveValue(BeFalse()))
		}
	}

	r.ReferenceAgain = nil // the run stopped before its fourth turn: one order, said so
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(HaveField("Value", "reference first only (the second pair did not finish): 15.0s / 10.0s = 1.50")))

	r.Config.Order, r.OperatorAgain = orderReferenceFirst, nil // one order asked for: the one pair
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(HaveField("Value", "15.0s / 10.0s = 1.50")))
}

// TestRatiosAreJudgedAtTheIssuesScale: the converge, resize and API
// server CPU ratios are judged at N=1000, where the issue sets them; a
// smaller run prints them beside the limit and its scale, and fails no
// check on them.
func TestRatiosAreJudgedAtTheIssuesScale(t *testing.T) {
	g := NewWithT(t)
	run := func(seconds, apiCPU float64) *pairResult {
		phase := func() *phaseResult {
			return &phaseResult{Seconds: seconds, Fleets: 10, Converged: 10, APIServerCPUSeconds: apiCPU}
		}
		return &pairResult{N: 10, Converge: phase(), Resize: phase()}
	}
	ratioRows := []string{"converge time / cheapest client", "resize time / cheapest client",
		"API server CPU, converge: operator / cheapest client", "API server CPU, resize: operator / cheapest client"}
	for _, n := range []int{100, 999, 1000, 2000} {
		var r results
		r.Config.N, r.Config.Order = n, orderReferenceFirst
		r.Reference, r.Operator = run(10, 10), run(20, 20) // 2.0 × on every ratio
		r.evaluate()
		for _, row := range ratioRows {
			var found *target
			for i := range r.Targets {
				if strings.HasPrefix(r.Targets[i].Name, row) {
					found = &r.Targets[i]
				}
			}
			g.Expect(found).NotTo(BeNil(), "N=%d: %s", n, row)
			if n >= 1000 {
				g.Expect(found.Met).To(HaveValue(BeFalse()), "N=%d: %s", n, row)
				g.Expect(found.Limit).NotTo(ContainSubstring("at N="), "N=%d: %s", n, row)
				g.Expect(r.failedChecks(false)).To(ContainElement(HavePrefix(found.Name)), "N=%d", n)
			} else {
				g.Expect(found.Met).To(BeNil(), "N=%d: %s", n, row)
				g.Expect(found.Limit).To(HaveSuffix(" at N=1000"), "N=%d: %s", n, row)
			}
		}
		if n < 1000 {
			g.Expect(r.failedChecks(false)).To(BeEmpty(), "N=%d", n)
		}
	}
}

// TestStableFleetsAreCheckedAndTabled: a stable fleet the operator never
// converged fails the run like a Deployment fleet would, and the table puts
// the stable fleets' ratio beside the Deployment fleets'.
func TestStableFleetsAreCheckedAndTabled(t *testing.T) {
	g := NewWithT(t)
	run := func(converge, resize float64, converged int) *pairResult {
		return &pairResult{N: 10, Converge: &phaseResult{Seconds: converge, Fleets: 10, Converged: converged},
			Resize: &phaseResult{Seconds: resize, Fleets: 10, Converged: 10}}
	}
	var r results
	r.Config.N, r.Config.Order, r.Config.CI = 10, orderReferenceFirst, true
	r.Reference, r.Operator = run(10, 10, 10), run(12, 11, 10)
	r.StableReference, r.StableOperator = run(20, 10, 10), run(25, 12, 10)
	r.evaluate()
	g.Expect(r.failedChecks(true)).To(BeEmpty())
	g.Expect(r.table()).To(ContainSubstring("converge time / reference, stable fleets with warm restarts"))
	g.Expect(r.Targets).To(ContainElement(And(HaveField("Name", "converge time / reference, stable fleets with warm restarts"),
		HaveField("Value", "25.0s / 20.0s = 1.25"), HaveField("Note", ContainSubstring("Deployment fleets 1.20")))))
	g.Expect(r.Targets).To(ContainElement(HaveField("Value", "12.0s / 10.0s = 1.20")))

	r.StableOperator.Converge.Converged = 9
	r.evaluate()
	g.Expect(r.failedChecks(true)).To(ContainElement(ContainSubstring("every stable fleet converges (operator)")))
}

// TestWritesPerFleetIsPrintedInFull: a figure just over its limit is not
// printed as the limit (two fleets' progress reports in a thousand made
// 5.002 writes a fleet, once shown as "5.00" beside "NO").
func TestWritesPerFleetIsPrintedInFull(t *testing.T) {
	g := NewWithT(t)
	var r results
	r.Config.N = 1000
	r.Operator = &pairResult{N: 1000, Converge: &phaseResult{Fleets: 1000, Converged: 1000, WritesPerFleetExclEvents: 5.002}}
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(And(HaveField("Name", "writes per fleet, converge (applies + status)"),
		HaveField("Value", "5.002"), HaveField("Met", HaveValue(BeFalse())))))
	r.Operator.Converge.WritesPerFleetExclEvents = 5
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(And(HaveField("Name", "writes per fleet, converge (applies + status)"),
		HaveField("Value", "5"), HaveField("Met", HaveValue(BeTrue())))))
}

// TestProgressReportsAreJudgedApart: the operator's progress-only status
// writes share one rate over all fleets, so the converge's writes a fleet
// are judged without them, and they are reported with their rate.
func TestProgressReportsAreJudgedApart(t *testing.T) {
	g := NewWithT(t)
	var r results
	r.Config.N = 1000
	op := &phaseResult{Fleets: 1000, Converged: 1000, Seconds: 143, WritesPerFleetExclEvents: 5.179, ProgressWrites: 179}
	r.Operator = &pairResult{N: 1000, Converge: op}
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(And(HaveField("Name", "writes per fleet, converge (applies + status)"),
		HaveField("Value", "5.179"), HaveField("Met", HaveValue(BeTrue())),
		HaveField("Note", ContainSubstring("5 besides 179 progress reports (1.25 a second over 143s, all fleets together)")))))
	op.ProgressWrites = 178
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(And(HaveField("Name", "writes per fleet, converge (applies + status)"),
		HaveField("Met", HaveValue(BeFalse())), HaveField("Note", ContainSubstring("5.001 besides 178 progress reports")))),
		"one write more than the progress reports is over")
	op.WritesPerFleetExclEvents, op.ProgressWrites, op.Fleets, r.Config.N, r.Operator.N = 5.08, 6, 100, 100, 100
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(HaveField("Note", ContainSubstring("5.02 besides 6 progress reports"))), "printed rounded")
}

// TestRSSNoteGivesTheFloorAndTheColdStart: the RSS line splits the memory
// into what the process needs with no fleet and what each fleet adds, and
// reports the cold start with its own pod count.
func TestRSSNoteGivesTheFloorAndTheColdStart(t *testing.T) {
	g := NewWithT(t)
	var r results
	r.Config.N, r.Config.Size, r.Config.ResizeTo = 1000, 3, 5
	r.Operator = &pairResult{N: 1000, Converge: &phaseResult{Fleets: 1000, Converged: 1000, PeakRSSMiB: 120},
		Resize: &phaseResult{Fleets: 1000, Converged: 1000, PeakRSSMiB: 130}}
	r.OperatorProcess = &procStats{RSSMiB: 117, RSSAnonMiB: 89, RSSFileMiB: 28}
	r.OperatorProcessAtStart = &procStats{RSSMiB: 40, RSSAnonMiB: 14, RSSFileMiB: 26}
	r.Restart = &restartResult{PeakRSSMiB: 157, RSSAnonMiB: 100, RSSFileMiB: 28}
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(And(
		HaveField("Name", "peak RSS at N=1000 (3000 pods)"), HaveField("Value", "120.0 MiB"), HaveField("Met", HaveValue(BeFalse())),
		HaveField("Note", And(
			ContainSubstring("at 0 fleets: 40.0 MiB = 14.0 anonymous + 26.0 file, so 76.8 KiB anonymous a fleet"),
			ContainSubstring("cold start with 5000 pods (restart): peak 157.0 MiB"))))))
	g.Expect(r.Targets).To(ContainElement(And(
		HaveField("Name", "restart peak RSS / running peak with 5000 pods"), HaveField("Value", "1.21 (157.0 / 130.0 MiB)"),
		HaveField("Met", HaveValue(BeTrue())))))
}

// The QPS sweep gets its curve and its column; "no limit" is said, not 0.
func TestQPSSweepIsPlottedAndTabled(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	r := &results{}
	r.Config.N, r.Config.Workers = 100, 4
	for _, q := range []float64{0, 10, 50} {
		r.Sweep = append(r.Sweep, sweepPoint{Sweep: "qps", N: 100, Workers: 4, QPS: q, OperatorSeconds: 20 + 100/(q+1), ReferenceSeconds: 15})
	}
	g.Expect(plots(r, dir)).To(Succeed())
	g.Expect(filepath.Join(dir, plotQPS)).To(BeAnExistingFile())
	g.Expect(filepath.Join(dir, plotWorkers)).NotTo(BeAnExistingFile())
	table := r.table()
	g.Expect(table).To(MatchRegexp(`\| 100\s+\| 4\s+\| no limit\s+\| 120\.0`))
	g.Expect(table).To(MatchRegexp(`\| 100\s+\| 4\s+\| 10\s+\| 29\.1`))

	// A later run without the sweep leaves no stale curve behind.
	r.Sweep = nil
	g.Expect(plots(r, dir)).To(Succeed())
	g.Expect(filepath.Join(dir, plotQPS)).NotTo(BeAnExistingFile())
}

// TestCheapestResizePatchesOnlyReplicas: the cheapest client's write after a
// resize is a merge patch of spec.replicas and nothing else, for both
// workloads; a pass with no change has nothing to send.
func TestCheapestResizePatchesOnlyReplicas(t *testing.T) {
	g := NewWithT(t)
	build := func(size int32, stable bool) (string, client.Object) {
		mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache-0001", Namespace: "bench", UID: "u1"},
			Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To(size)}}
		if stable {
			mc.Spec.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
		}
		spec := policy.Resolve(&mc.Spec, policy.Config{DefaultImage: "memcached:1.6"})
		kind, ac := "Deployment", runtime.ApplyConfiguration(desired.Deployment(mc, spec))
		if stable {
			kind, ac = "StatefulSet", desired.StatefulSet(mc, spec)
		}
		obj, err := typedObject(kind, ac)
		g.Expect(err).NotTo(HaveOccurred())
		return kind, obj
	}
	for _, stable := range []bool{false, true} {
		kind, before := build(3, stable)
		_, after := build(5, stable)
		data, err := client.MergeFrom(before).Data(after)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).To(Equal(`{"spec":{"replicas":5}}`), kind)
		data, err = client.MergeFrom(before).Data(before)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(data)).To(Equal(`{}`), kind)
		g.Expect(before.GetOwnerReferences()).To(HaveLen(1), "%s: owned by its fleet, as the operator's", kind)
	}
}

// TestAPIServerCPURatio: the API server's CPU is compared like time, the
// operator's over the cheapest client's, and printed in CPU seconds.
func TestAPIServerCPURatio(t *testing.T) {
	g := NewWithT(t)
	run := func(cpu float64) *pairResult {
		return &pairResult{N: 10, Converge: &phaseResult{Seconds: 10, Fleets: 10, Converged: 10, APIServerCPUSeconds: cpu}}
	}
	var r results
	r.Config.N, r.Config.Order = 1000, orderReferenceFirst
	r.Reference, r.Operator = run(10), run(16)
	r.evaluate()
	g.Expect(r.Targets).To(ContainElement(And(HaveField("Name", "API server CPU, converge: operator / cheapest client"),
		HaveField("Value", "16.0 CPU s / 10.0 CPU s = 1.60"), HaveField("Met", HaveValue(BeFalse())))))
}

// TestUserWriteRetriesOnlyAStaleWebhookConnection: a fleet write is sent a
// second time only when the API server's webhook call met a closed
// connection, and only once.
func TestUserWriteRetriesOnlyAStaleWebhookConnection(t *testing.T) {
	const call = `failed calling webhook "mutate.memcached.cache.example.com": failed to call webhook: Post "https://127.0.0.1:33963/mutate?timeout=10s": `
	for _, tc := range []struct {
		name  string
		err   error
		calls int
	}{
		{"broken pipe", apierrors.NewInternalError(errors.New(call + "write tcp 127.0.0.1:60546->127.0.0.1:33963: write: broken pipe")), 2},
		{"reset", apierrors.NewInternalError(errors.New(call + "read tcp 127.0.0.1:60546->127.0.0.1:33963: read: connection reset by peer")), 2},
		{"EOF", apierrors.NewInternalError(errors.New(call + "EOF")), 2},
		{"webhook down", apierrors.NewInternalError(errors.New(call + "dial tcp 127.0.0.1:33963: connect: connection refused")), 1},
		{"denied", apierrors.NewForbidden(cachev1alpha1.GroupVersion.WithResource("memcacheds").GroupResource(), "cache-0001", errors.New("write: broken pipe")), 1},
		{"internal, no webhook", apierrors.NewInternalError(errors.New("etcdserver: write: broken pipe")), 1},
		{"success", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			before := staleWebhookConnRetries.Load()
			calls := 0
			err := userWrite("test", func() error { calls++; return tc.err })
			g.Expect(calls).To(Equal(tc.calls))
			g.Expect(staleWebhookConnRetries.Load() - before).To(BeEquivalentTo(tc.calls - 1))
			if tc.err == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tc.err))
			}
		})
	}
}

func TestLastLines(t *testing.T) {
	g := NewWithT(t)
	file := filepath.Join(t.TempDir(), "log")
	g.Expect(os.WriteFile(file, []byte("a webhook 1\nb\nc webhook 2\nd webhook 3\n"), 0o600)).To(Succeed())
	g.Expect(lastLines(file, 2, "webhook")).To(Equal("c webhook 2\nd webhook 3\n"))
	g.Expect(lastLines(file, 9, "")).To(Equal("a webhook 1\nb\nc webhook 2\nd webhook 3\n"))
	g.Expect(lastLines(filepath.Join(t.TempDir(), "none"), 2, "")).To(ContainSubstring("no such file"))
}

// A failed run names the operator's state, the end of its log and the API
// server's failed webhook calls, and nothing else of the API server's log.
func TestExplain(t *testing.T) {
	g := NewWithT(t)
	opDir, clusterDir := t.TempDir(), t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(opDir, "operator.log"), []byte("started\nwebhook served\n"), 0o600)).To(Succeed())
	g.Expect(os.MkdirAll(filepath.Join(clusterDir, "logs"), 0o700)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(clusterDir, "logs", "kube-apiserver.log"), []byte(
		"I flags.go] FLAG: --audit-webhook-mode=\"batch\"\n"+
			"W dispatcher.go] Failed calling webhook, failing closed mutate.memcached.cache.example.com: write: broken pipe\n"), 0o600)).To(Succeed())
	b := &bench{op: &operatorProc{dir: opDir}, s: &clusterState{Dir: clusterDir}}
	out := b.explain()
	g.Expect(out).To(HavePrefix("operator: not running\n"))
	g.Expect(out).To(ContainSubstring("started\nwebhook served\n"))
	g.Expect(out).To(ContainSubstring("Failed calling webhook, failing closed mutate.memcached.cache.example.com: write: broken pipe"))
	g.Expect(out).NotTo(ContainSubstring("FLAG"))
}

// TestSecondReferenceIsNamed: with -second-reference prompt, the second
// reference line's rows and turns say whose figures they are, and its status names
// the generation with the rollout under way, which the bench does not take
// for a converged fleet.
func TestSecondReferenceIsNamed(t *testing.T) {
	g := NewWithT(t)
	run := func(s float64) *pairResult {
		return &pairResult{N: 10, Converge: &phaseResult{Seconds: s, Fleets: 10, Converged: 10, APIServerCPUSeconds: s}}
	}
	for writes, name := range map[referenceWrites]string{
		writesApply: "server-side apply client", writesPrompt: "cheapest client with its status at once",
	} {
		var r results
		r.Config.N, r.Config.Order, r.Config.SecondReference = 10, orderReferenceFirst, writes
		r.Reference, r.ApplyReference, r.Operator = run(10), run(12), run(13)
		r.evaluate()
		g.Expect(r.Targets).To(ContainElement(And(HaveField("Name", "converge time: "+name+" / cheapest client"),
			HaveField("Value", "12.0s / 10.0s = 1.20"))), string(writes))
		g.Expect(turnApplyReferenceAgain.named(writes)).To(Equal("reference: "+name+", again"), "the turn's log line")
	}
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 3}, Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](1)}}
	mc.Status.Nodes, mc.Status.ReadyReplicas = []string{"c-1"}, 1
	promptStatus(mc)
	g.Expect(mc.Status.ObservedGeneration).To(Equal(int64(3)))
	g.Expect(fleetReady(mc, 1, nil)).To(BeFalse(), "named, not converged")
}
