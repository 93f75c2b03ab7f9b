package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/memcached-operator/webhooks"
)

// The cheapest webhook allows a review under its own UID, as the API
// server requires, and refuses what is not a review.
func TestAllowReviewAnswersWithTheUID(t *testing.T) {
	reviews, err := admissionReviews("ns")
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	allowReview(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(reviews[0]))))
	var out struct {
		Response struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
		} `json:"response"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, w.Body.String())
	}
	if out.Response.UID != "bench-mutate" || !out.Response.Allowed {
		t.Errorf("answer %s", w.Body.String())
	}
	w = httptest.NewRecorder()
	allowReview(w, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{")))
	if w.Code != http.StatusBadRequest {
		t.Errorf("a broken review got %d", w.Code)
	}
}

// The fixed answer on controller-runtime's server allows a review under its
// own UID, through the same review decoding and encoding as the handlers,
// and without their patch.
func TestFixedAnswerOnTheServerAllowsWithTheUID(t *testing.T) {
	reviews, err := admissionReviews("ns")
	if err != nil {
		t.Fatal(err)
	}
	for _, fixed := range []bool{true, false} {
		hs, err := handlerWebhooks(fixed)
		if err != nil {
			t.Fatal(err)
		}
		out, body := mutate(t, hs, reviews[0])
		if out.UID != "bench-mutate" || !out.Allowed || (out.Patch == nil) != fixed {
			t.Errorf("fixed %t: answer %s", fixed, body)
		}
	}
}

type reviewAnswer struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
	Patch   []byte `json:"patch"`
}

// mutate posts review to the mutating webhook of hs: its answer, and the
// body it came in.
func mutate(t *testing.T, hs map[string]http.Handler, review []byte) (reviewAnswer, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, webhooks.MutatePath, strings.NewReader(string(review)))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	hs[webhooks.MutatePath].ServeHTTP(w, r)
	var out struct {
		Response reviewAnswer `json:"response"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, w.Body.String())
	}
	return out.Response, w.Body.String()
}

// The webhook's p99 is set beside the cheapest webhook's at the same rate.
func TestFloorNote(t *testing.T) {
	direct := admissionResult{Path: pathDirect, Rate: 200, P50Ms: 1, P99Ms: 3}
	all := []admissionResult{direct,
		{Path: pathFloor, Rate: 50, P50Ms: 9, P99Ms: 9},
		{Path: pathFloor, Rate: 200, P50Ms: 0.5, P99Ms: 2}}
	if got, want := floorNote(all, direct), "cheapest webhook 2.00 ms, p50 1.00 against 0.50 ms: 1.50 × its p99"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := floorNote(all[:2], direct); got != "" {
		t.Errorf("without the cheapest webhook at that rate: %q", got)
	}
	all = append(all, admissionResult{Path: pathHandlers, Rate: 200, P50Ms: 0.75, P99Ms: 2.5})
	if got, want := floorNote(all, direct), "cheapest webhook 2.00 ms, p50 1.00 against 0.50 ms: 1.50 × its p99; the operator's handlers alone 2.50 ms (p50 0.75)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	all = append(all, admissionResult{Path: pathServer, Rate: 200, P50Ms: 0.6, P99Ms: 2.25}, admissionResult{Path: pathServer, Rate: 50, P50Ms: 7, P99Ms: 7})
	if got, want := floorNote(all, direct), "cheapest webhook 2.00 ms, p50 1.00 against 0.50 ms: 1.50 × its p99; a fixed answer on controller-runtime's server 2.25 ms (p50 0.60); the operator's handlers alone 2.50 ms (p50 0.75)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// What the operator's collector did in the step, when it was read.
	collected := direct
	collected.Collector = &collectorUse{Cycles: 3, CPUSeconds: 0.1804}
	if got, want := floorNote(all, collected), "cheapest webhook 2.00 ms, p50 1.00 against 0.50 ms: 1.50 × its p99; a fixed answer on controller-runtime's server 2.25 ms (p50 0.60); the operator's handlers alone 2.50 ms (p50 0.75); the operator's garbage collector ran 3 times in the step, 180 CPU ms"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// With a second copy the note's figure is the mean the target judges by.
	all = append(all, admissionResult{Path: pathFloorCopy, Rate: 200, P50Ms: 0.5, P99Ms: 4})
	if got, want := floorNote(all, direct), "cheapest webhook 3.00 ms, p50 1.00 against 0.50 ms: 1.00 × its p99; a fixed answer on controller-runtime's server 2.25 ms (p50 0.60); the operator's handlers alone 2.50 ms (p50 0.75)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// The cheapest webhook's second copy is reported beside the first at 200/s,
// never judged, and only when both were measured.
func TestFloorSpread(t *testing.T) {
	r := &results{Admission: []admissionResult{{Path: pathDirect, Rate: 200, P99Ms: 3},
		{Path: pathFloor, Rate: 200, P99Ms: 2}, {Path: pathFloorCopy, Rate: 50, P99Ms: 9}, {Path: pathFloorCopy, Rate: 200, P99Ms: 1.6}}}
	r.evaluate()
	var got []target
	for _, tg := range r.Targets {
		if tg.Name == "admission p99 at 200/s: cheapest webhook / its second copy" {
			got = append(got, tg)
		}
	}
	if len(got) != 1 || got[0].Value != "1.25 (2.00 / 1.60 ms)" || got[0].Met != nil {
		t.Errorf("got %+v, want one unjudged row of 1.25 (2.00 / 1.60 ms)", got)
	}
	if _, ok := floorSpread(r.Admission[2:], r.Admission[3]); ok {
		t.Error("reported without the first copy's figure")
	}
}

// The webhook's p99 at 200/s is judged against the cheapest webhook's in
// the same run outside CI, only reported in CI, and only reported without
// the cheapest webhook's figure.
func TestWebhookP99Target(t *testing.T) {
	for _, tc := range []struct {
		p99, floor float64
		ci         bool
		want       string
	}{{2.99, 2, false, "yes"}, {3.01, 2, false, "no"}, {7.4, 5, false, "yes"}, {3.01, 2, true, "none"}, {1, 0, false, "none"}} {
		r := &results{Admission: []admissionResult{{Path: pathDirect, Rate: 200, P99Ms: tc.p99}}}
		if tc.floor > 0 {
			r.Admission = append(r.Admission, admissionResult{Path: pathFloor, Rate: 200, P99Ms: tc.floor}, admissionResult{Path: pathFloor, Rate: 50, P99Ms: 100})
		}
		r.Config.CI = tc.ci
		r.evaluate()
		if tc.floor > 0 && !tc.ci {
			// A second copy of the cheapest webhook: the ratio is to their mean.
			r.Targets = nil
			r.Admission = append(r.Admission, admissionResult{Path: pathFloorCopy, Rate: 200, P99Ms: 2 * tc.floor})
			r.evaluate()
			for _, tg := range r.Targets {
				if tg.Name == "admission p99 at 200/s: webhook endpoint / cheapest webhook" && (tg.Met == nil || !*tg.Met) {
					t.Errorf("p99 %.2f ms against the mean of %.2f and %.2f: not met: %s", tc.p99, tc.floor, 2*tc.floor, tg.Value)
				}
			}
			r.Admission = r.Admission[:len(r.Admission)-1]
			r.Targets = nil
			r.evaluate()
		}
		got := "missing"
		for _, tg := range r.Targets {
			if tg.Name == "admission p99 at 200/s: webhook endpoint / cheapest webhook" {
				got = map[bool]string{true: "yes", false: "no"}[tg.Met != nil && *tg.Met]
				if tg.Met == nil {
					got = "none"
				}
			}
		}
		if got != tc.want {
			t.Errorf("p99 %.2f ms against %.2f, ci %t: met %s, want %s", tc.p99, tc.floor, tc.ci, got, tc.want)
		}
	}
}

// Short turns never count more than the offered rate: each request's
// interval, the last one's too, is part of the time spent sending.
func TestOpenLoopShortTurnsKeepTheRate(t *testing.T) {
	l := &load{}
	for range 5 {
		l.add(openLoop(context.Background(), 50, 100*time.Millisecond, func(context.Context, int) error { return nil }))
	}
	if res := l.result(pathFloor, 50); res.Requests != 25 || res.AchievedRate > 50 {
		t.Errorf("5 turns of 100 ms at 50/s: %d requests at %.1f/s, want 25 at no more than 50/s", res.Requests, res.AchievedRate)
	}
}

// A turn that would never end a window, or that gives a server no request,
// is refused before the bench starts; no rates, no check.
func TestCheckAdmissionTurn(t *testing.T) {
	for _, tc := range []struct {
		turn  time.Duration
		rates string
		ok    bool
	}{
		{100 * time.Millisecond, "50,200,1000", true},
		{time.Second, "1", true},
		{0, "", true},
		{0, "50", false},
		{-time.Second, "50", false},
		{10 * time.Millisecond, "50,200", false},
		{100 * time.Millisecond, "0", false},
		{100 * time.Millisecond, "-50", false},
		{100 * time.Millisecond, "fifty", false},
	} {
		if err := checkAdmissionTurn(tc.turn, tc.rates); (err == nil) != tc.ok {
			t.Errorf("turn %s, rates %q: error %v, want ok %t", tc.turn, tc.rates, err, tc.ok)
		}
	}
}

// TestLoadAddsTurns: a path's turns add up to one result: every request,
// every error, the first error met, and quantiles over all the latencies.
func TestLoadAddsTurns(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i := range v {
			out[i] = time.Duration(v[i]) * time.Millisecond
		}
		return out
	}
	l := &load{}
	l.add(&load{latencies: ms(1, 1, 1, 1, 1), sending: time.Second})
	l.add(&load{latencies: ms(9, 2, 2, 2, 2), sending: time.Second, errors: 1, firstError: "first"})
	l.add(&load{latencies: ms(3), sending: time.Second, errors: 2, firstError: "second"})
	want := admissionResult{Path: pathDirect, Rate: 200, AchievedRate: 11.0 / 3, Requests: 11,
		Errors: 3, FirstError: "first", P50Ms: 2, P95Ms: 9, P99Ms: 9, MaxMs: 9}
	if got := l.result(pathDirect, 200); !reflect.DeepEqual(got, want) {
		t.Errorf("result:\n got %+v\nwant %+v", got, want)
	}
	if got, want := (&load{}).result(pathFloor, 50), (admissionResult{Path: pathFloor, Rate: 50}); !reflect.DeepEqual(got, want) {
		t.Errorf("no requests:\n got %+v\nwant %+v", got, want)
	}
}

// The validating endpoint's review is already defaulted, as the API server
// sends it after the mutating webhook: the operator's defaulting finds
// nothing to add to it, and does to the mutating one's.
func TestValidateReviewIsDefaulted(t *testing.T) {
	reviews, err := admissionReviews("ns")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := handlerWebhooks(false)
	if err != nil {
		t.Fatal(err)
	}
	for i, wantPatch := range []bool{true, false} {
		out, body := mutate(t, hs, reviews[i])
		if !out.Allowed {
			t.Fatalf("review %d refused: %s", i, body)
		}
		if (len(out.Patch) > 0) != wantPatch {
			t.Errorf("review %d: patch %s, want one: %t", i, out.Patch, wantPatch)
		}
	}
}

// The collector's counters are read from the operator's metrics as
// controller-runtime's registry names them; a page without them is an
// error, not a step in which the collector never ran.
func TestOperatorCollectorReadsTheRuntimeCounters(t *testing.T) {
	page := "# TYPE go_gc_cycles_total_gc_cycles_total counter\ngo_gc_cycles_total_gc_cycles_total 412\n" +
		"# TYPE go_cpu_classes_gc_total_cpu_seconds_total counter\ngo_cpu_classes_gc_total_cpu_seconds_total 3.25\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(page)) }))
	defer srv.Close()
	port, err := strconv.Atoi(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{op: &operatorProc{metricsPort: port}}
	if got, err := b.operatorCollector(context.Background()); err != nil || got != (collectorUse{Cycles: 412, CPUSeconds: 3.25}) {
		t.Errorf("got %+v, %v", got, err)
	}
	page = "go_gc_duration_seconds_count 412\n"
	if got, err := b.operatorCollector(context.Background()); err == nil {
		t.Errorf("without the runtime's counters: %+v and no error", got)
	}
}

// When a rate is measured in several steps, each webhook row is judged
// against the cheapest webhook of its own step, the servers it took turns
// with.
func TestWebhookRowsCompareTheirOwnStep(t *testing.T) {
	r := &results{Admission: []admissionResult{
		{Path: pathDirect, Rate: 200, P99Ms: 3}, {Path: pathFloor, Rate: 200, P99Ms: 1}, {Path: pathFloorCopy, Rate: 200, P99Ms: 3},
		{Path: pathDirect, Rate: 200, Step: 1, P99Ms: 3}, {Path: pathFloor, Rate: 200, Step: 1, P99Ms: 3}, {Path: pathFloorCopy, Rate: 200, Step: 1, P99Ms: 3},
	}}
	r.evaluate()
	var got []string
	for _, tg := range r.Targets {
		switch tg.Name {
		case "admission p99 at 200/s: webhook endpoint / cheapest webhook", "admission p99 at 200/s: cheapest webhook / its second copy":
			got = append(got, tg.Value)
		}
	}
	want := []string{"1.50 (3.00 / 2.00 ms, the mean of 1.00 and 3.00)", "0.33 (1.00 / 3.00 ms)", "1.00 (3.00 / 3.00 ms, the mean of 3.00 and 3.00)", "1.00 (3.00 / 3.00 ms)"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
