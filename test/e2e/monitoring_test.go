//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/test/dashboard"
)

// The testbed's Prometheus (test/testbed/monitoring), reached through the API
// server's service proxy: the suite runs outside the cluster's network.
const promProxy = "/api/v1/namespaces/monitoring/services/prometheus-operated:9090/proxy/api/v1/"

// promGet reads one Prometheus API answer's data into out.
func promGet(ctx context.Context, path string, params map[string]string, out any) error {
	req := clientset.CoreV1().RESTClient().Get().AbsPath(promProxy + path)
	for k, v := range params {
		req = req.Param(k, v)
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w: %s", path, err, raw)
	}
	var answer struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return err
	}
	if answer.Status != "success" {
		return fmt.Errorf("prometheus %s: %s", path, answer.Error)
	}
	return json.Unmarshal(answer.Data, out)
}

type promSample struct {
	Metric map[string]string
	Value  float64
}

// promQuery evaluates an instant PromQL query.
func promQuery(ctx context.Context, q string) ([]promSample, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := promGet(ctx, "query", map[string]string{"query": q}, &data); err != nil {
		return nil, err
	}
	out := make([]promSample, 0, len(data.Result))
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: value %v: %w", q, r.Value, err)
		}
		out = append(out, promSample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// byPod maps each sample's pod label to its value.
func byPod(samples []promSample) map[string]float64 {
	m := map[string]float64{}
	for _, s := range samples {
		m[s.Metric["pod"]] = s.Value
	}
	return m
}

// promRange runs a range query, in the dashboard renderer's terms.
func promRange(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]dashboard.Series, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	params := map[string]string{
		"query": q, "start": strconv.FormatInt(start.Unix(), 10), "end": strconv.FormatInt(end.Unix(), 10),
		"step": strconv.Itoa(int(step.Seconds())),
	}
	if err := promGet(ctx, "query_range", params, &data); err != nil {
		return nil, err
	}
	out := make([]dashboard.Series, 0, len(data.Result))
	for _, r := range data.Result {
		s := dashboard.Series{Labels: r.Metric}
		for _, v := range r.Values {
			ts, _ := v[0].(float64)
			str, _ := v[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, fmt.Errorf("%q: value %v: %w", q, v, err)
			}
			s.Times = append(s.Times, time.Unix(int64(ts), 0))
			s.Values = append(s.Values, f)
		}
		out = append(out, s)
	}
	return out, nil
}

type promTarget struct {
	Labels    map[string]string `json:"labels"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

// podMemory is each of a fleet's pods' memory (the sum of its containers'
// working sets) as the resource metrics API serves it to an autoscaler.
func podMemory(ctx context.Context, g Gomega, ns, name string) map[string]int64 {
	raw, err := clientset.CoreV1().RESTClient().Get().
		AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", ns, "pods").
		Param("labelSelector", "app.kubernetes.io/instance="+name).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred(), string(raw))
	var list struct {
		Items []struct {
			Metadata   struct{ Name string }
			Containers []struct {
				Usage map[corev1.ResourceName]resource.Quantity
			}
		}
	}
	g.Expect(json.Unmarshal(raw, &list)).To(Succeed())
	out := map[string]int64{}
	for _, p := range list.Items {
		for _, c := range p.Containers {
			m := c.Usage[corev1.ResourceMemory]
			out[p.Metadata.Name] += m.Value()
		}
	}
	return out
}

func activeTargets(ctx context.Context) ([]promTarget, error) {
	var data struct {
		Active []promTarget `json:"activeTargets"`
	}
	err := promGet(ctx, "targets", map[string]string{"state": "active"}, &data)
	return data.Active, err
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func alerts(ctx context.Context) ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := promGet(ctx, "alerts", nil, &data)
	return data.Alerts, err
}

var _ = Describe("monitoring with a real Prometheus", Ordered, Label("monitoring"), func() {
	ctx := context.Background()
	const ns = "e2e-monitoring"
	var metricsService string

	BeforeAll(func() {
		Expect(images["PROMETHEUS_IMAGE"]).NotTo(BeEmpty(),
			"this testbed runs no Prometheus: start it with `make cluster-up MONITORING=1` (`make test-e2e` does)")
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(ns)))
		// Short scrape interval and `for`, so the alert fires within the spec;
		// the chart's helm-test objects go to this suite's namespace (the
		// operator suite's may not exist yet: suites run in random order).
		mustRun(helm(append([]string{"install", release, chart}, installArgs(
			"--set", "test.namespace="+ns,
			"--set", "metrics.serviceMonitor.enabled=true",
			"--set", "metrics.serviceMonitor.interval=5s",
			"--set", "metrics.serviceMonitor.scrapeTimeout=4s",
			"--set", "prometheusRule.enabled=true",
			"--set", "prometheusRule.notAvailableFor=15s",
		)...)...))
		svcs := &corev1.ServiceList{}
		Expect(k8s.List(ctx, svcs, client.InNamespace(operatorNamespace), client.MatchingLabels{
			"app.kubernetes.io/instance": release, "app.kubernetes.io/component": "metrics",
		})).To(Succeed())
		Expect(svcs.Items).To(HaveLen(1), "the chart's metrics Service")
		metricsService = svcs.Items[0].Name
	})
	AfterEach(func() { dumpOnFailure(ns, "monitoring") })
	AfterAll(func() {
		mustRun(kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false"))
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
	})

	It("scrapes every pod of a monitored fleet through its ServiceMonitor: memcached_up 1 from the first scrape, sets counted", func() {
		name := "monitored"
		mustRun(kubectlApply(monitoredFleet(ns, name, "    serviceMonitor: {enabled: true, interval: 10s}\n")))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/"+name, "--timeout=3m"))
		readyAt := time.Now()
		Expect(mustRun(kubectl("get", "memcached", name, "-n", ns, "-o",
			`jsonpath={.status.conditions[?(@.type=="ServiceMonitorReady")].status}`))).To(Equal("True"))
		Expect(mustRun(kubectl("get", "servicemonitor", name, "-n", ns, "-o", "jsonpath={.metadata.ownerReferences[0].kind}"))).
			To(Equal("Memcached"))

		var pods []string
		Eventually(func(g Gomega) {
			pods = podNames(ctx, g, ns, name)
			g.Expect(pods).To(HaveLen(2))
			up, err := promQuery(ctx, fmt.Sprintf(`memcached_up{namespace=%q, service=%q}`, ns, name))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(slices.Sorted(maps.Keys(byPod(up)))).To(Equal(pods))
			for pod, v := range byPod(up) {
				g.Expect(v).To(Equal(1.0), pod)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("fleet Ready → memcached_up 1 for every pod in Prometheus (ServiceMonitor → config → first scrape)",
			time.Since(readyAt).String())
		// Not one scrape of either pod said down: up from the first scrape on.
		lowest, err := promQuery(ctx, fmt.Sprintf(`min_over_time(memcached_up{namespace=%q, service=%q}[10m])`, ns, name))
		Expect(err).NotTo(HaveOccurred())
		Expect(byPod(lowest)).To(HaveLen(2))
		for pod, v := range byPod(lowest) {
			Expect(v).To(Equal(1.0), pod)
		}

		setsQuery := fmt.Sprintf(`sum(memcached_commands_total{namespace=%q, service=%q, command="set"})`, ns, name)
		before, err := promQuery(ctx, setsQuery)
		Expect(err).NotTo(HaveOccurred())
		Expect(before).To(HaveLen(1))
		Expect(probe(ctx, ns, "set", "memcached", name+"."+ns+".svc:11211")).To(ContainSubstring("set/get ok"))
		Eventually(func(g Gomega) float64 {
			after, err := promQuery(ctx, setsQuery)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(after).To(HaveLen(1))
			return after[0].Value
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeNumerically(">", before[0].Value))
	})

	It("scrapes every operator replica through its authenticated endpoint, the fleets' series from the leader alone, and refuses a scrape without a token", func() {
		Eventually(func(g Gomega) {
			targets, err := activeTargets(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var ours []promTarget
			for _, t := range targets {
				if t.Labels["namespace"] == operatorNamespace && t.Labels["service"] == metricsService {
					ours = append(ours, t)
				}
			}
			g.Expect(ours).To(HaveLen(2), "both replicas")
			for _, t := range ours {
				g.Expect(t.Health).To(Equal("up"), t.LastError)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		// The per-fleet series keep the fleet's namespace (honorLabels), and
		// only the leading replica sends them: one series, not one a replica.
		Eventually(func(g Gomega) {
			ready, err := promQuery(ctx, fmt.Sprintf(`memcached_operator_fleet_pods{namespace=%q, name="monitored", state="ready"}`, ns))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ready).To(HaveLen(1))
			g.Expect(ready[0].Value).To(Equal(2.0))
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

		out := probe(ctx, ns, "noauth", "status", fmt.Sprintf("https://%s.%s.svc:8443/metrics", metricsService, operatorNamespace))
		Expect(strings.TrimSpace(out)).To(Equal("status 401"), "a scrape without a token is refused")
	})

	It("draws every panel of the chart's dashboard from the fleet's live metrics under client load", func() {
		name := "monitored"
		start := time.Now()
		// 50 operations a second for a minute: sets, gets of those keys, and
		// gets of keys never set, hashed over both servers.
		out := probeArgs(ctx, ns, "load", "load", name+"."+ns+".svc.cluster.local", "11211", "50", "60s")
		Expect(out).To(ContainSubstring("failed=0 "))
		Expect(out).To(ContainSubstring("lost=0 "))
		Expect(out).To(ContainSubstring("servers=2"))
		AddReportEntry("load client", out)
		// Render what Prometheus holds; retried until the load's last scrapes are in.
		d, err := dashboard.Load(filepath.Join(repoRoot(), "charts", "memcached-operator", "dashboards", "memcached-fleets.json"))
		Expect(err).NotTo(HaveOccurred())
		png := filepath.Join(repoRoot(), "_output", "monitoring", "dashboard.png")
		Expect(os.MkdirAll(filepath.Dir(png), 0o755)).To(Succeed())
		Eventually(func(g Gomega) {
			res, err := dashboard.Render(ctx, d, promRange, dashboard.Options{
				Vars:         map[string]string{"namespace": ns, "fleet": name},
				RateInterval: "20s", // four scrapes of 5 s
				Start:        start.Add(-time.Minute), End: time.Now(), Step: 5 * time.Second,
			}, png)
			g.Expect(err).NotTo(HaveOccurred())
			for _, p := range d.Panels {
				g.Expect(res[p.Title]).To(BeNumerically(">", 0), "panel %q shows no data", p.Title)
			}
			hits, err := promQuery(ctx, fmt.Sprintf(`sum(increase(memcached_commands_total{namespace=%q, service=%q, command="get", status="hit"}[2m]))`, ns, name))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(hits).To(HaveLen(1))
			g.Expect(hits[0].Value).To(BeNumerically(">", 100), "the load's hits are counted")
		}).WithTimeout(time.Minute).WithPolling(5 * time.Second).Should(Succeed())
		AddReportEntry("dashboard rendered from live data", png)
	})

	It("fires MemcachedFleetNotAvailable for a fleet that cannot start, and only for it", func() {
		name := "broken"
		created := time.Now()
		// An image no node has and none can pull: the pod never becomes ready.
		mustRun(kubectlApply(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec: {size: 1, image: "localhost/memcached:not-there"}`))
		Eventually(func(g Gomega) {
			all, err := alerts(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			var states []string
			for _, a := range all {
				if a.Labels["alertname"] != "MemcachedFleetNotAvailable" || a.Labels["namespace"] != ns {
					continue
				}
				g.Expect(a.Labels["name"]).To(Equal(name), "only the broken fleet is not Available")
				states = append(states, a.State)
			}
			g.Expect(states).To(Equal([]string{"firing"}))
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("broken fleet created → MemcachedFleetNotAvailable firing (for: 15s)", time.Since(created).String())
		mustRun(kubectl("delete", "memcached", name, "-n", ns, "--wait"))
	})

	It("resizes a fleet through its scale subresource with kubectl autoscale: out when its pods' memory passes the target, never in", func() {
		name := "autoscaled"
		// As Git would hold it once an autoscaler owns the size: without one.
		inGit := `apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  resources: {requests: {memory: 64Mi}, limits: {memory: 96Mi}}
`
		mustRun(kubectlApply(inGit + "  size: 2\n"))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/"+name, "--timeout=3m"))

		// The target sits 16 MiB above the fuller pod's memory now, so only
		// the data written below can pass it.
		var idle map[string]int64
		Eventually(func(g Gomega) {
			idle = podMemory(ctx, g, ns, name)
			g.Expect(idle).To(HaveLen(2))
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		target := slices.Max(slices.Collect(maps.Values(idle)))>>20 + 16
		mustRun(kubectl("autoscale", "memcached/"+name, "-n", ns, "--min=2", "--max=3", fmt.Sprintf("--memory=%dMi", target)))
		// What docs/operations.md recommends for a cache: scaling in drops a
		// server's share of the keys, so the autoscaler only scales out.
		mustRun(kubectl("patch", "hpa", name, "-n", ns, "--type=merge", "-p",
			`{"spec":{"behavior":{"scaleDown":{"selectPolicy":"Disabled","stabilizationWindowSeconds":0}}}}`))
		Eventually(func(g Gomega) {
			hpa := &autoscalingv2.HorizontalPodAutoscaler{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hpa)).To(Succeed())
			g.Expect(hpa.Status.CurrentMetrics).To(HaveLen(1), "the autoscaler reads the pods' memory")
			g.Expect(hpa.Status.DesiredReplicas).To(BeNumerically("==", 2))
		}).WithTimeout(2 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())

		start := time.Now()
		var fills []*corev1.Pod
		for _, p := range fleetPodList(ctx, Default, ns, name) {
			fills = append(fills, startProbe(ctx, ns, "fill-"+p.Name, nil, "fill", p.Status.PodIP+":11211", "40"))
		}
		for _, f := range fills {
			Expect(probeLog(ctx, f)).To(ContainSubstring("fill stored="))
		}
		Eventually(func(g Gomega) {
			mc, err := getMemcached(ns, name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mc.Spec).To(HaveKeyWithValue("size", BeNumerically("==", 3)), "the autoscaler wrote spec.size through the scale subresource")
			g.Expect(mc.Status.ReadyReplicas).To(BeNumerically("==", 3))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		AddReportEntry("pods filled → autoscaler resized the fleet to 3 ready pods", time.Since(start).String())
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/"+name, "--timeout=2m"))

		By("a GitOps sync leaves the autoscaler's size alone when Git holds none, and conflicts when it holds one")
		mustRun(kubectlApply(inGit, "--server-side", "--field-manager=gitops"))
		out, err := kubectlApply(inGit+"  size: 2\n", "--server-side", "--field-manager=gitops")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(".spec.size"))
		mc, err := getMemcached(ns, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(mc.Spec).To(HaveKeyWithValue("size", BeNumerically("==", 3)))

		// A target no pod reaches: the autoscaler now wants the minimum, 2,
		// and may not scale in.
		mustRun(kubectl("patch", "hpa", name, "-n", ns, "--type=json", "-p",
			`[{"op":"replace","path":"/spec/metrics/0/resource/target/averageValue","value":"1Gi"}]`))
		Eventually(func(g Gomega) {
			hpa := &autoscalingv2.HorizontalPodAutoscaler{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hpa)).To(Succeed())
			g.Expect(hpa.Status.ObservedGeneration).To(HaveValue(Equal(hpa.Generation)))
			var limited *autoscalingv2.HorizontalPodAutoscalerCondition
			for i, c := range hpa.Status.Conditions {
				if c.Type == autoscalingv2.ScalingLimited {
					limited = &hpa.Status.Conditions[i]
				}
			}
			g.Expect(limited).NotTo(BeNil())
			g.Expect(limited.Status).To(Equal(corev1.ConditionTrue), limited.Message)
			g.Expect(limited.Reason).To(Equal("ScaleDownLimit"), limited.Message)
		}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		Consistently(func(g Gomega) {
			mc, err := getMemcached(ns, name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mc.Spec).To(HaveKeyWithValue("size", BeNumerically("==", 3)))
		}).WithTimeout(10 * time.Second).WithPolling(time.Second).Should(Succeed())
		mustRun(kubectl("delete", "hpa", name, "-n", ns))
		mustRun(kubectl("delete", "memcached", name, "-n", ns, "--wait=false"))
	})

	It("removes a fleet's ServiceMonitor, and Prometheus its targets, with the fleet", func() {
		name := "monitored"
		mustRun(kubectl("delete", "memcached", name, "-n", ns, "--wait"))
		Eventually(func() string {
			out, _ := kubectl("get", "servicemonitor", "-n", ns, "-o", "name")
			return out
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeEmpty())
		Eventually(func(g Gomega) {
			targets, err := activeTargets(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			for _, t := range targets {
				g.Expect(t.Labels["namespace"]).NotTo(Equal(ns), "a target of the deleted fleet: %v", t.Labels)
			}
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	})
})
