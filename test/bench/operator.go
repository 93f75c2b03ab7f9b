package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/internal/policy"
	"github.com/example/memcached-operator/webhooks"
)

// admittedLabel marks the namespaces the bench's webhook configurations
// cover: the bench's own, never the cluster's.
const admittedLabel = "bench.cache.example.com/admitted"

// clkTck is USER_HZ, the unit of /proc/PID/stat's CPU times (100 on Linux).
const clkTck = 100

// operatorProc runs the operator built from ./cmd/memcached-operator as a
// subprocess, with its webhooks served on loopback.
type operatorProc struct {
	bin, dir, kubeconfig                           string
	webhookPort, probePort, metricsPort, pprofPort int
	// memoryLimit, when set, runs the operator in a memory cgroup of that
	// limit (memcg), as a container with resources.limits.memory.
	memoryLimit string
	cg          *memcg
	// flags follow the bench's own on every start; env is added to the
	// bench's environment.
	flags, env []string
	cmd        *exec.Cmd
	exited     chan struct{}
}

// operatorMemoryTarget and operatorMemoryLimit are what the chart passes
// with its default resources: the heap aims at 90% of the memory limit.
const (
	operatorMemoryTarget = "90%"
	operatorMemoryLimit  = "256Mi"
)

// operatorDefaults are the defaults the bench runs the operator with
// (--default-image; its other defaults are the flags' own), which the
// reference and the operator's handlers alone complete a spec with too.
var operatorDefaults = policy.Config{DefaultImage: "memcached:1.6"}

// operatorMaxSize is the operator's --max-size in the bench: webhooks may
// only judge what the CRD schema allows, up to 1000.
const operatorMaxSize = 1000

func newOperatorProc(s *clusterState, bin, dir string, flags, env []string) (*operatorProc, error) {
	o := &operatorProc{bin: bin, dir: dir, kubeconfig: s.kubeconfig(userOperator), flags: flags, env: env}
	for _, p := range []*int{&o.webhookPort, &o.probePort, &o.metricsPort, &o.pprofPort} {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		*p = port
	}
	return o, os.MkdirAll(filepath.Join(dir, "webhook-certs"), 0o700)
}

// installWebhooks writes a self-signed serving certificate for 127.0.0.1
// into the operator's --webhook-cert-dir and registers the chart's three
// webhooks with URLs on loopback and that certificate as caBundle.
func (o *operatorProc) installWebhooks(ctx context.Context, c client.Client) error {
	kp, err := newServing(nil, "memcached-operator-webhook", []string{"localhost"})
	if err != nil {
		return err
	}
	certDir := filepath.Join(o.dir, "webhook-certs")
	if err := os.WriteFile(filepath.Join(certDir, "tls.crt"), kp.CertPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(certDir, "tls.key"), kp.KeyPEM, 0o600); err != nil {
		return err
	}
	cfg := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{
			URL:      ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", o.webhookPort, path)),
			CABundle: kp.CertPEM,
		}
	}
	rule := func(resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{"cache.example.com"}, APIVersions: []string{"v1alpha1"},
				Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}}
	}
	// As the chart sets them (values.yaml defaults).
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{admittedLabel: "true"}}
	fail := ptr.To(admissionregistrationv1.Fail)
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	equiv := ptr.To(admissionregistrationv1.Equivalent)
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "memcached-operator-bench"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mutate.memcached.cache.example.com", ClientConfig: cfg(webhooks.MutatePath),
			Rules: rule("memcacheds", create, update), FailurePolicy: fail, SideEffects: none, MatchPolicy: equiv,
			NamespaceSelector: sel, TimeoutSeconds: ptr.To[int32](10), AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "memcached-operator-bench"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.memcached.cache.example.com", ClientConfig: cfg(webhooks.ValidatePath),
			Rules: rule("memcacheds", create, update), FailurePolicy: fail, SideEffects: none, MatchPolicy: equiv,
			NamespaceSelector: sel, TimeoutSeconds: ptr.To[int32](10), AdmissionReviewVersions: []string{"v1"},
		}, {
			Name: "validate-scale.memcached.cache.example.com", ClientConfig: cfg(webhooks.ValidateScalePath),
			Rules: rule("memcacheds/scale", update), FailurePolicy: fail, SideEffects: none, MatchPolicy: equiv,
			NamespaceSelector: sel, TimeoutSeconds: ptr.To[int32](10), AdmissionReviewVersions: []string{"v1"},
		}},
	}
	for _, obj := range []client.Object{mutating, validating} {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return err
		}
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T: %w", obj, err)
		}
	}
	return nil
}

// installCRD creates the CRD from the chart's crds/ and waits until it is
// established.
func installCRD(ctx context.Context, c client.Client, repoRoot string) error {
	files, err := filepath.Glob(filepath.Join(repoRoot, "charts", "memcached-operator", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRD in charts/memcached-operator/crds (%w)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		if err := pollFor(ctx, "CRD "+crd.Name+" established", time.Minute, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// start runs the operator reconciling namespace with workers, and waits
// until /readyz answers (the webhook server serves).
func (o *operatorProc) start(ctx context.Context, namespace string, workers int, extra ...string) error {
	if o.cmd != nil {
		return fmt.Errorf("operator already running (pid %d)", o.cmd.Process.Pid)
	}
	logFile, err := os.OpenFile(filepath.Join(o.dir, "operator.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	// In a memory cgroup the chart would pass that limit instead.
	limit := operatorMemoryLimit
	if o.memoryLimit != "" {
		limit = o.memoryLimit
	}
	args := append([]string{
		"--leader-elect=false",
		"--watch-namespaces=" + namespace,
		fmt.Sprintf("--max-concurrent-reconciles=%d", workers),
		fmt.Sprintf("--webhook-port=%d", o.webhookPort),
		"--webhook-cert-dir=" + filepath.Join(o.dir, "webhook-certs"),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", o.probePort),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", o.metricsPort), "--metrics-secure=false",
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", o.pprofPort),
		fmt.Sprintf("--max-size=%d", operatorMaxSize), "--default-image=" + operatorDefaults.DefaultImage,
		"--memory-target=" + operatorMemoryTarget, "--memory-limit=" + limit,
	}, append(o.flags, extra...)...)
	_, _ = fmt.Fprintf(logFile, "\n===== %s memcached-operator %s\n", time.Now().Format(time.RFC3339), strings.Join(args, " "))
	cmd := exec.Command(o.bin, args...)
	cmd.Env = append(append(os.Environ(), o.env...), "KUBECONFIG="+o.kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting operator: %w", err)
	}
	o.cmd, o.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(o.exited) }()
	if o.memoryLimit != "" {
		cg, err := newMemcg("memcached-bench-operator", o.memoryLimit)
		if err == nil {
			o.cg, err = cg, cg.add(cmd.Process.Pid)
		}
		if err != nil {
			_ = o.stop()
			return fmt.Errorf("operator's memory cgroup: %w", err)
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", o.probePort)
	if err := waitHTTP(ctx, "operator", url, nil, time.Minute); err != nil {
		_ = o.stop()
		return err
	}
	return nil
}

// state says whether the operator runs, or how it ended when it exited on
// its own: what a failed run prints, since CI keeps only the bench's output.
func (o *operatorProc) state() string {
	if o.cmd == nil {
		return "operator: not running"
	}
	select {
	case <-o.exited:
		return fmt.Sprintf("operator: exited on its own (pid %d): %v", o.cmd.Process.Pid, o.cmd.ProcessState)
	default:
		return fmt.Sprintf("operator: running (pid %d)", o.cmd.Process.Pid)
	}
}

// stop sends SIGTERM to the operator (by its PID) and waits for it to exit.
func (o *operatorProc) stop() error {
	if o.cmd == nil {
		return nil
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.exited:
	case <-time.After(30 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.exited
	}
	o.cmd = nil
	if o.cg != nil {
		// Each run's peak is its own, as VmHWM is.
		err := o.cg.remove()
		o.cg = nil
		return err
	}
	return nil
}

// procStats are a process' peak RSS and CPU time so far.
type procStats struct {
	PeakRSSMiB float64 `json:"peakRssMiB"`
	RSSMiB     float64 `json:"rssMiB"`
	// RSSAnonMiB and RSSFileMiB split the current RSS: the heap, stacks and
	// runtime on one side, the mapped binary's pages on the other.
	RSSAnonMiB float64 `json:"rssAnonMiB"`
	RSSFileMiB float64 `json:"rssFileMiB"`
	CPUSeconds float64 `json:"cpuSeconds"`
	// MajorFaults are page faults that read from the disk: under a memory
	// limit, the binary's pages reclaimed and read again.
	MajorFaults int64 `json:"majorFaults"`
	// Memcg is the memory cgroup's account, when the operator runs in one.
	Memcg *memcgStats `json:"memcg,omitempty"`
}

func (o *operatorProc) stats() (procStats, error) {
	if o.cmd == nil {
		return procStats{}, fmt.Errorf("operator not running")
	}
	st, err := readProcStats(o.cmd.Process.Pid)
	if err == nil && o.cg != nil {
		var m memcgStats
		if m, err = o.cg.stats(); err == nil {
			st.Memcg = &m
		}
	}
	return st, err
}

// readProcStats reads VmHWM and VmRSS from /proc/PID/status and utime+stime
// from /proc/PID/stat.
func readProcStats(pid int) (procStats, error) {
	var st procStats
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kib, _ := strconv.ParseFloat(fields[1], 64)
		switch fields[0] {
		case "VmHWM:":
			st.PeakRSSMiB = kib / 1024
		case "VmRSS:":
			st.RSSMiB = kib / 1024
		case "RssAnon:":
			st.RSSAnonMiB = kib / 1024
		case "RssFile:":
			st.RSSFileMiB = kib / 1024
		}
	}
	stat, err := procStatFields(pid)
	if err != nil {
		return st, err
	}
	utime, _ := strconv.ParseFloat(stat[11], 64)
	stime, _ := strconv.ParseFloat(stat[12], 64)
	st.CPUSeconds = (utime + stime) / clkTck
	st.MajorFaults, _ = strconv.ParseInt(stat[9], 10, 64)
	return st, nil
}

// metric sums the samples of a metric whose labels contain every filter
// (e.g. `controller="memcached"`) from the operator's /metrics.
func (o *operatorProc) metric(ctx context.Context, name string, filters ...string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", o.metricsPort), nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, f := range filters {
			if !strings.Contains(line, f) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("parsing %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// profile saves a pprof profile (cpu for seconds, or heap) to file.
func (o *operatorProc) profile(ctx context.Context, kind string, seconds int, file string) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", o.pprofPort, kind)
	if kind == "profile" {
		url += fmt.Sprintf("?seconds=%d", seconds)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() { _ = out.Close() }()
	_, err = out.ReadFrom(resp.Body)
	return err
}
