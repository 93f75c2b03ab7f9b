package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/webhooks"
)

// Admission paths measured.
const (
	// pathDryRun is a server-side dry-run create through the API server:
	// authentication, the mutating and the validating webhook, no storage.
	pathDryRun = "dry-run create via API server"
	// pathDirect is an AdmissionReview POSTed to the webhook server,
	// alternating the mutating and the validating endpoint.
	pathDirect = "webhook endpoint (mutate/validate)"
	// pathFloor is the same reviews POSTed to the cheapest webhook.
	pathFloor = "cheapest webhook (fixed answer)"
	// pathFloorCopy is a second process of the cheapest webhook: the same
	// nothing measured twice, which is how far two p99s of one run can
	// differ by chance.
	pathFloorCopy = "cheapest webhook, second copy"
	// pathHandlers is the same reviews POSTed to the operator's handlers on
	// controller-runtime's webhook server, in a process with nothing else.
	pathHandlers = "operator's handlers alone"
	// pathServer is the same reviews POSTed to controller-runtime's webhook
	// server with a handler that allows them: the server and its review
	// decoding and encoding, without the operator's handlers.
	pathServer = "fixed answer on controller-runtime's server"
)

// maxInFlight bounds the open-loop generator: past it, requests wait (and
// the achieved rate shows the shortfall) instead of piling up without end.
const maxInFlight = 512

type admissionResult struct {
	Path string `json:"path"`
	Rate int    `json:"rate"`
	// Step counts the rate steps before this one: the servers loaded in
	// the same step took turns, and only they are compared.
	Step         int     `json:"step,omitempty"`
	AchievedRate float64 `json:"achievedRate"`
	Requests     int     `json:"requests"`
	Errors       int     `json:"errors"`
	FirstError   string  `json:"firstError,omitempty"`
	P50Ms        float64 `json:"p50Ms"`
	P95Ms        float64 `json:"p95Ms"`
	P99Ms        float64 `json:"p99Ms"`
	MaxMs        float64 `json:"maxMs"`
	// APIServerWebhookCalls is, for the dry-run path, the API server's own
	// measure of each webhook call (its histogram's first bucket is 5 ms).
	APIServerWebhookCalls map[string]string `json:"apiServerWebhookCalls,omitempty"`
	// Collector is, for the operator's endpoint, what the operator's
	// garbage collector did during the step.
	Collector *collectorUse `json:"collector,omitempty"`
}

// collectorUse is the work of a Go process's garbage collector over a time,
// from its runtime metrics: a review that arrives while the collector marks
// a heap of caches waits longer than one that arrives in a process with none.
type collectorUse struct {
	Cycles     int     `json:"cycles"`
	CPUSeconds float64 `json:"cpuSeconds"`
}

// operatorCollector reads the operator's collector counters. By the
// admission step the operator has collected many times, so a zero is a
// counter missing from its metrics.
func (b *bench) operatorCollector(ctx context.Context) (collectorUse, error) {
	var use collectorUse
	cycles, err := b.op.metric(ctx, "go_gc_cycles_total_gc_cycles_total")
	if err == nil {
		use.Cycles = int(cycles)
		use.CPUSeconds, err = b.op.metric(ctx, "go_cpu_classes_gc_total_cpu_seconds_total")
	}
	if err == nil && (use.Cycles == 0 || use.CPUSeconds == 0) {
		err = fmt.Errorf("the operator's metrics lack the collector's counters (cycles %d, CPU %g s)", use.Cycles, use.CPUSeconds)
	}
	return use, err
}

// admission sends requests at each rate for the step's duration, open loop:
// request i starts at t0 + i/rate whatever the latency of the others.
func (b *bench) admission(ctx context.Context, _ string) error {
	rates, err := intList(b.f.admissionRates)
	if err != nil || len(rates) == 0 {
		return err
	}
	const ns = "bench-admission"
	if err := createNamespace(ctx, b.admin, ns); err != nil {
		return err
	}
	direct, err := b.directClient()
	if err != nil {
		return err
	}
	reviews, err := admissionReviews(ns)
	if err != nil {
		return err
	}
	urls := []string{
		fmt.Sprintf("https://127.0.0.1:%d%s", b.op.webhookPort, webhooks.MutatePath),
		fmt.Sprintf("https://127.0.0.1:%d%s", b.op.webhookPort, webhooks.ValidatePath),
	}
	paths := map[string]func(ctx context.Context, i int) error{
		pathDryRun: func(ctx context.Context, i int) error {
			mc := &cachev1alpha1.Memcached{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("admission-%d", i), Namespace: ns},
				Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
			}
			return b.admin.Create(ctx, mc, client.DryRunAll)
		},
		pathDirect: func(ctx context.Context, i int) error {
			return postReview(ctx, direct, urls[i%2], reviews[i%2])
		},
	}
	for _, path := range []string{pathFloor, pathFloorCopy} {
		floor, err := startFloorWebhook(ctx, direct, filepath.Join(b.op.dir, "webhook-certs"), reviews[0])
		if err != nil {
			return err
		}
		defer floor.stop()
		paths[path] = func(ctx context.Context, i int) error {
			return postReview(ctx, direct, floor.url(), reviews[i%2])
		}
	}
	for path, args := range map[string][]string{pathHandlers: nil, pathServer: {"-fixed"}} {
		srv, err := startWebhookProc(ctx, direct, "handler-webhook", filepath.Join(b.op.dir, "webhook-certs"), webhooks.MutatePath, reviews[0], args...)
		if err != nil {
			return err
		}
		defer srv.stop()
		paths[path] = func(ctx context.Context, i int) error {
			return postReview(ctx, direct, fmt.Sprintf("https://127.0.0.1:%d%s", srv.port, []string{webhooks.MutatePath, webhooks.ValidatePath}[i%2]), reviews[i%2])
		}
	}
	// The webhook servers take short turns, round after round, so that what
	// the machine does meanwhile (a stall of a few hundred milliseconds, say)
	// falls on each alike rather than on whichever server held a long turn;
	// the dry-run path, which loads the API server, runs after.
	servers := []string{pathDirect, pathHandlers, pathServer, pathFloor, pathFloorCopy}
	// Warm up: TLS connections and the API server's webhook clients exist
	// before the first measured request.
	warm := func(path string) { _ = openLoop(ctx, 50, time.Second, paths[path]) }
	for _, path := range servers {
		warm(path)
	}
	for step, rate := range rates {
		loads := map[string]*load{}
		for _, path := range servers {
			loads[path] = &load{}
		}
		gcBefore, gcErr := b.operatorCollector(ctx)
		for done := time.Duration(0); done < b.f.admissionDuration; done += b.f.admissionTurn {
			for _, path := range servers {
				loads[path].add(openLoop(ctx, rate, min(b.f.admissionTurn, b.f.admissionDuration-done), paths[path]))
			}
		}
		gcAfter, err := b.operatorCollector(ctx)
		if err = errors.Join(gcErr, err); err != nil {
			return err
		}
		for _, path := range servers {
			res := loads[path].result(path, rate)
			res.Step = step
			if path == pathDirect {
				res.Collector = &collectorUse{Cycles: gcAfter.Cycles - gcBefore.Cycles, CPUSeconds: gcAfter.CPUSeconds - gcBefore.CPUSeconds}
			}
			b.addAdmission(res)
		}
	}
	warm(pathDryRun)
	for _, rate := range rates {
		before, herr := scrapeWebhookHistogram(ctx, b.s)
		res := openLoop(ctx, rate, b.f.admissionDuration, paths[pathDryRun]).result(pathDryRun, rate)
		if after, err := scrapeWebhookHistogram(ctx, b.s); err == nil && herr == nil {
			res.APIServerWebhookCalls = shareUnder(before, after, "0.005")
		}
		b.addAdmission(res)
	}
	return nil
}

func (b *bench) addAdmission(res admissionResult) {
	gc := ""
	if c := res.Collector; c != nil {
		gc = fmt.Sprintf(", the operator's collector %d cycles, %.0f CPU ms", c.Cycles, c.CPUSeconds*1000)
	}
	logf("admission %s at %d/s: %d requests, %d errors, p50 %.2f ms, p99 %.2f ms%s %v",
		res.Path, res.Rate, res.Requests, res.Errors, res.P50Ms, res.P99Ms, gc, res.APIServerWebhookCalls)
	b.res.Admission = append(b.res.Admission, res)
}

// directClient trusts the webhook's self-signed certificate and keeps
// connections alive, as the API server does.
func (b *bench) directClient() (*http.Client, error) {
	caPEM, err := os.ReadFile(filepath.Join(b.op.dir, "webhook-certs", "tls.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			MaxIdleConnsPerHost: maxInFlight,
		},
	}, nil
}

// admissionReviews are a CREATE review of a Memcached for the mutating and
// for the validating endpoint (the latter already defaulted, as the API
// server would send it).
func admissionReviews(ns string) ([][]byte, error) {
	mc := &cachev1alpha1.Memcached{
		TypeMeta:   metav1.TypeMeta{APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Name: "direct", Namespace: ns},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
	}
	defaulted := mc.DeepCopy()
	policy.DefaultCreate(&defaulted.Spec, operatorDefaults)
	review := func(uid string, obj *cachev1alpha1.Memcached) ([]byte, error) {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		return json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       types.UID(uid),
				Kind:      metav1.GroupVersionKind{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"},
				Resource:  metav1.GroupVersionResource{Group: "cache.example.com", Version: "v1alpha1", Resource: "memcacheds"},
				Name:      obj.Name,
				Namespace: ns,
				Operation: admissionv1.Create,
				Object:    runtime.RawExtension{Raw: raw},
				UserInfo:  admissionUser(),
				DryRun:    ptr.To(false),
			},
		})
	}
	m, err := review("bench-mutate", mc)
	if err != nil {
		return nil, err
	}
	v, err := review("bench-validate", defaulted)
	if err != nil {
		return nil, err
	}
	return [][]byte{m, v}, nil
}

func postReview(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(data, out); err != nil {
		return err
	}
	if out.Response == nil || !out.Response.Allowed {
		return fmt.Errorf("%s: not allowed: %s", url, data)
	}
	return nil
}

// openLoop calls do rate times a second for d and records the latencies.
func openLoop(ctx context.Context, rate int, d time.Duration, do func(context.Context, int) error) *load {
	total := int(float64(rate) * d.Seconds())
	l := &load{latencies: make([]time.Duration, total)}
	var (
		errs     atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
	)
	sem := make(chan struct{}, maxInFlight)
	t0 := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := range total {
		if wait := time.Until(t0.Add(time.Duration(i) * interval)); wait > 0 {
			select { // pacing the load, not waiting for a condition
			case <-ctx.Done():
				return &load{}
			case <-time.After(wait):
			}
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			start := time.Now()
			err := do(ctx, i)
			l.latencies[i] = time.Since(start)
			if err != nil {
				if errs.Add(1) == 1 {
					firstErr.Store(err.Error())
				}
			}
		}()
	}
	// The last request's interval belongs to the window too: without it a
	// turn of 5 requests at 50/s would count 80 ms of sending, not 100.
	l.sending = time.Since(t0) + interval
	wg.Wait()
	l.errors = int(errs.Load())
	if s, ok := firstErr.Load().(string); ok {
		l.firstError = s
	}
	return l
}

// A load is what one or more open loops on one path measured.
type load struct {
	latencies  []time.Duration
	sending    time.Duration
	errors     int
	firstError string
}

func (l *load) add(o *load) {
	l.latencies = append(l.latencies, o.latencies...)
	l.sending += o.sending
	l.errors += o.errors
	if l.firstError == "" {
		l.firstError = o.firstError
	}
}

func (l *load) result(path string, rate int) admissionResult {
	res := admissionResult{Path: path, Rate: rate, Requests: len(l.latencies), Errors: l.errors, FirstError: l.firstError}
	if len(l.latencies) == 0 {
		return res
	}
	lat := slices.Sorted(slices.Values(l.latencies))
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
	}
	res.AchievedRate = float64(len(lat)) / l.sending.Seconds()
	res.P50Ms, res.P95Ms, res.P99Ms, res.MaxMs = q(0.50), q(0.95), q(0.99), float64(lat[len(lat)-1].Microseconds())/1000
	return res
}

func admissionUser() authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: userAdmin, Groups: []string{"system:masters", "system:authenticated"}}
}

// The cheapest webhook is what an admission request costs on this machine
// with nothing of the operator's in it: the same Go TLS and HTTP server and
// certificate, a handler that reads the review's UID and allows it. The
// operator's webhook latency is judged against it in the same run, since
// the machine's own wake-up and scheduling delays are most of a request
// at a few hundred a second.

// cmdFloorWebhook serves the cheapest webhook on 127.0.0.1 until it is
// signalled.
func cmdFloorWebhook(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("floor-webhook", flag.ExitOnError)
	port := fs.Int("port", 0, "Port on 127.0.0.1.")
	certDir := fs.String("cert-dir", "", "Folder with tls.crt and tls.key.")
	_ = fs.Parse(args)
	cert, err := tls.LoadX509KeyPair(filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key"))
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr:              net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)),
		Handler:           http.HandlerFunc(allowReview),
		ReadHeaderTimeout: 10 * time.Second,
		// HTTP/1.1 only, as controller-runtime's webhook server by default.
		TLSConfig:    &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// allowReview answers an AdmissionReview with its UID, allowed.
func allowReview(w http.ResponseWriter, r *http.Request) {
	var review struct {
		Request struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &review)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	uid, _ := json.Marshal(review.Request.UID)
	_, _ = fmt.Fprintf(w, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":%s,"allowed":true}}`, uid)
}

// floorWebhook is the cheapest webhook, run as a process of its own as the
// operator is.
type floorWebhook struct {
	cmd  *exec.Cmd
	port int
	path string
}

func startFloorWebhook(ctx context.Context, hc *http.Client, certDir string, review []byte) (*floorWebhook, error) {
	return startWebhookProc(ctx, hc, "floor-webhook", certDir, "/", review)
}

// startWebhookProc starts the bench's own subcommand sub, with args after
// its port and certificates, serving webhooks, and waits until it answers
// review on path.
func startWebhookProc(ctx context.Context, hc *http.Client, sub, certDir, path string, review []byte, args ...string) (*floorWebhook, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{sub, "-port", strconv.Itoa(port), "-cert-dir", certDir}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &floorWebhook{cmd: cmd, port: port, path: path}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := postReview(ctx, hc, f.url(), review)
		if err == nil {
			return f, nil
		}
		if time.Now().After(deadline) {
			f.stop()
			return nil, fmt.Errorf("bench %s did not answer: %w", sub, err)
		}
		select { // polling a condition: the server is up
		case <-ctx.Done():
			f.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (f *floorWebhook) url() string { return fmt.Sprintf("https://127.0.0.1:%d%s", f.port, f.path) }

func (f *floorWebhook) stop() {
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	_ = f.cmd.Wait()
}
