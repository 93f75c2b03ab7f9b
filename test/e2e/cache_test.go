//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/status"
)

const (
	cacheNamespace = "e2e-cache"
	// cacheKeys is how many keys each fleet holds before a change: about
	// 3,300 a server, so one server's share is measured to a tenth of a
	// percent.
	cacheKeys = 10000
	cacheSize = 3
)

var keysLine = regexp.MustCompile(`keys mode=(\w+) count=(\d+) hits=(\d+) errors=(\d+) servers=(\d+)`)

// cacheFleet is one of the two fleets the suite changes side by side: the
// default (a Deployment, pods with random names) and stable pods with warm
// restarts.
type cacheFleet struct {
	name, spec string
	// servers is the keys probe's SERVERS: the stable names a client
	// configured with a static list is given, or, for pods without stable
	// names, the Service, resolved to the pods' addresses at each run.
	servers string
}

// service is the fleet's Service name, which the load resolves every
// second, as a client with DNS discovery.
func (f cacheFleet) service() string { return f.name + "." + cacheNamespace + ".svc.cluster.local" }

var cacheFleets = []cacheFleet{
	{name: "today", spec: "  size: 3\n  resources: {limits: {memory: 128Mi}}\n",
		servers: "today." + cacheNamespace + ".svc.cluster.local"},
	{name: "warm", spec: "  size: 3\n  workload: StatefulSet\n  warmRestart: {enabled: true}\n  resources: {limits: {memory: 128Mi}}\n",
		servers: "warm-0.warm." + cacheNamespace + ".svc.cluster.local,warm-1.warm." + cacheNamespace + ".svc.cluster.local,warm-2.warm." + cacheNamespace + ".svc.cluster.local"},
}

// cacheResult is what one change did to one fleet.
type cacheResult struct {
	kept       float64
	load       loadResult
	toReady    time.Duration
	readErrors int
}

func (r cacheResult) String() string {
	return fmt.Sprintf("%.1f %% kept, %d/%d client errors, Ready in %s", 100*r.kept, r.load.failed, r.load.ops, r.toReady.Round(time.Second))
}

// keysProbe runs `probe keys MODE SERVERS 11211 cacheKeys` for every fleet
// at once and returns hits and errors by fleet. A Deployment fleet's
// Service can still resolve to a pod its rollout just ended (the name's
// answer lives 5 s in CoreDNS's cache): the keys would then hash over
// another set of servers than the one written, so a run that saw another
// count than the fleet's size is made again, as a client rediscovers.
func keysProbe(ctx context.Context, mode string) map[string][2]int {
	GinkgoHelper()
	out := map[string][2]int{}
	pending := cacheFleets
	Eventually(func(g Gomega) {
		pods := map[string]*corev1.Pod{}
		for _, f := range pending {
			pods[f.name] = startProbe(ctx, cacheNamespace, "keys-"+f.name, nil, "keys", mode, f.servers, "11211", strconv.Itoa(cacheKeys))
		}
		var again []cacheFleet
		for _, f := range pending {
			log := probeLog(ctx, pods[f.name])
			m := keysLine.FindStringSubmatch(log)
			Expect(m).NotTo(BeNil(), "no keys report in:\n"+log)
			if m[5] != strconv.Itoa(cacheSize) {
				GinkgoWriter.Printf("keys %s: %s resolved to %s servers, again\n", mode, f.name, m[5])
				again = append(again, f)
				continue
			}
			hits, _ := strconv.Atoi(m[3])
			errs, _ := strconv.Atoi(m[4])
			out[f.name] = [2]int{hits, errs}
		}
		pending = again
		g.Expect(pending).To(BeEmpty(), "the keys spread over every server of each fleet")
	}).WithTimeout(wait).WithPolling(time.Second).Should(Succeed())
	return out
}

// podNamesOf lists a fleet's live pods by name.
func podNamesOf(ctx context.Context, name string) []string {
	GinkgoHelper()
	return podNames(ctx, Default, cacheNamespace, name)
}

// memcachedImages are the images the memcached containers of a fleet's
// live pods are told to run. (The kubelet reports a tag of the image it
// runs: the testbed's two memcached tags are one image, so it names either.)
func memcachedImages(ctx context.Context, g Gomega, name string) []string {
	var out []string
	for _, p := range fleetPodList(ctx, g, cacheNamespace, name) {
		for _, c := range p.Spec.Containers {
			if c.Name == "memcached" {
				out = append(out, c.Image)
			}
		}
	}
	return out
}

// warmUIDs maps the warm fleet's live pods to their UIDs.
func warmUIDs(ctx context.Context) map[string]string {
	out := map[string]string{}
	for _, p := range fleetPodList(ctx, Default, cacheNamespace, "warm") {
		out[p.Name] = string(p.UID)
	}
	return out
}

var _ = Describe("keeping the cache through changes", Ordered, Label("cache", "multi-node"), func() {
	ctx := context.Background()
	results := map[string]map[string]cacheResult{}
	var order []string

	BeforeAll(func() {
		Expect(images["MEMCACHED_NEXT_IMAGE"]).NotTo(BeEmpty(), "images.env has no MEMCACHED_NEXT_IMAGE: run `make images`")
		Expect(len(schedulableNodes(ctx, Default))).To(BeNumerically(">=", 3), "a drain needs 3 nodes: `make cluster-up NODES=3`")
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", cacheNamespace, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(cacheNamespace)))
		mustRun(helm(append([]string{"install", release, chart}, installArgs("--set", "test.namespace="+cacheNamespace)...)...))
		for _, f := range cacheFleets {
			mustRun(kubectlApply(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: ` + f.name + `, namespace: ` + cacheNamespace + `}
spec:
` + f.spec))
		}
		for _, f := range cacheFleets {
			fleetReadyIn(cacheNamespace, f.name, cacheSize)
		}
		Expect(podNamesOf(ctx, "warm")).To(Equal([]string{"warm-0", "warm-1", "warm-2"}), "stable names")
	})
	AfterEach(func() {
		dumpOnFailure(cacheNamespace)
		for _, n := range nodeNames(ctx) {
			_, _ = kubectl("uncordon", n)
		}
	})
	AfterAll(func() {
		var b strings.Builder
		b.WriteString("| change | today (Deployment) | stable + warm |\n|---|---|---|\n")
		for _, change := range order {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", change, results[change]["today"], results[change]["warm"])
		}
		AddReportEntry("keys kept through changes", b.String())
		GinkgoWriter.Print(b.String())
		// For docs/keeping-the-cache.md: the table of the last run.
		Expect(os.WriteFile(filepath.Join(testbedDir(), "cache-kept.md"), []byte(b.String()), 0o644)).To(Succeed())
		mustRun(kubectl("delete", "namespace", cacheNamespace, "--ignore-not-found", "--wait=false"))
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
	})

	// serving: the fleet has size live pods, every one ready and listed in
	// its status (which may lag behind a pod lost a moment ago).
	serving := func(f cacheFleet) func(Gomega) {
		return func(g Gomega) {
			pods := fleetPodList(ctx, g, cacheNamespace, f.name)
			g.Expect(pods).To(HaveLen(cacheSize), f.name)
			var names []string
			for i := range pods {
				g.Expect(status.PodReady(&pods[i])).To(BeTrue(), pods[i].Name)
				names = append(names, pods[i].Name)
			}
			mc, err := getMemcached(cacheNamespace, f.name)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mc.Status.Nodes).To(ConsistOf(names), f.name)
		}
	}

	// measure writes every key to both fleets, makes the change under
	// client load, waits until both are Ready for their new generation with
	// every pod serving (and whatever ready adds), reads every key back and
	// records what was kept.
	measure := func(change string, do func(), ready func(g Gomega)) map[string]cacheResult {
		GinkgoHelper()
		written := keysProbe(ctx, "write")
		for _, f := range cacheFleets {
			Expect(written[f.name]).To(Equal([2]int{cacheKeys, 0}), "every key stored in %s", f.name)
		}
		loads := map[string]*corev1.Pod{}
		for _, f := range cacheFleets {
			loads[f.name] = startProbe(ctx, cacheNamespace, "load-"+f.name, nil, "load", f.service(), "11211", "100", "8m")
		}
		for _, p := range loads {
			probeRunning(ctx, p)
		}
		start := time.Now()
		do()
		out := map[string]cacheResult{}
		for _, f := range cacheFleets {
			fleetReadyIn(cacheNamespace, f.name, cacheSize)
			Eventually(serving(f)).WithTimeout(wait).Should(Succeed())
			out[f.name] = cacheResult{toReady: time.Since(start)}
		}
		if ready != nil {
			Eventually(ready).WithTimeout(wait).Should(Succeed())
		}
		for _, f := range cacheFleets {
			stopProbe(ctx, loads[f.name])
		}
		read := keysProbe(ctx, "read")
		for _, f := range cacheFleets {
			r := out[f.name]
			r.load = parseLoad(probeLog(ctx, loads[f.name]))
			r.kept = float64(read[f.name][0]) / cacheKeys
			r.readErrors = read[f.name][1]
			out[f.name] = r
			AddReportEntry(change+": "+f.name, r.String())
			Expect(r.readErrors).To(BeZero(), "%s: every server answers once Ready", f.name)
			Expect(r.load.failed*cacheSize).To(BeNumerically("<=", r.load.ops), "%s: client errors within one server's share: %s", f.name, r.load)
		}
		results[change] = out
		order = append(order, change)
		return out
	}
	patchBoth := func(patch string) func() {
		return func() {
			for _, f := range cacheFleets {
				mustRun(kubectl("patch", "memcached", f.name, "-n", cacheNamespace, "--type=merge", "-p", patch))
			}
		}
	}

	It("restarts a warm fleet's memcached in place on an image upgrade: every pod keeps its cache, under its name", func() {
		next := images["MEMCACHED_NEXT_IMAGE"]
		uids := warmUIDs(ctx)
		got := measure("image upgrade", patchBoth(`{"spec":{"image":"`+next+`"}}`), func(g Gomega) {
			for _, f := range cacheFleets {
				imgs := memcachedImages(ctx, g, f.name)
				g.Expect(imgs).To(HaveLen(cacheSize), f.name)
				for _, img := range imgs {
					g.Expect(img).To(Equal(next), "%s runs the new image", f.name)
				}
			}
		})
		Expect(warmUIDs(ctx)).To(Equal(uids), "the same pods, restarted in place")
		Expect(got["warm"].kept).To(BeNumerically(">=", 0.99))
	})

	It("restarts a warm fleet's memcached in place on a maxConnections change: every pod keeps its cache", func() {
		uids := warmUIDs(ctx)
		got := measure("maxConnections change", patchBoth(`{"spec":{"maxConnections":2048}}`), nil)
		Expect(warmUIDs(ctx)).To(Equal(uids), "the same pods, restarted in place")
		Expect(got["warm"].kept).To(BeNumerically(">=", 0.99))
	})

	// resized is the check that a warm fleet's pods run with a memory limit
	// and the item memory it gives.
	resized := func(limit, itemMemory string) func(Gomega) {
		return func(g Gomega) {
			for _, p := range fleetPodList(ctx, g, cacheNamespace, "warm") {
				g.Expect(p.Annotations[desired.ArgsAnnotation]).To(ContainSubstring(`"-m","`+itemMemory+`"`), "%s has the new item memory", p.Name)
				for _, c := range p.Status.ContainerStatuses {
					if c.Name == desired.MemcachedContainer {
						g.Expect(c.Resources).NotTo(BeNil())
						g.Expect(c.Resources.Limits.Memory().String()).To(Equal(limit), "the kubelet resized %s", p.Name)
					}
				}
			}
		}
	}

	It("resizes a warm fleet's memcached in place on a memory limit raised: every pod keeps its cache, copied into the new item memory", func() {
		uids := warmUIDs(ctx)
		got := measure("memory limit up", patchBoth(`{"spec":{"resources":{"limits":{"memory":"160Mi"}}}}`), resized("160Mi", "144"))
		Expect(warmUIDs(ctx)).To(Equal(uids), "the same pods, resized in place")
		Expect(got["warm"].kept).To(BeNumerically(">=", 0.99))
	})

	It("resizes a warm fleet's memcached in place on a memory limit lowered: every pod keeps what fits, here every key", func() {
		uids := warmUIDs(ctx)
		got := measure("memory limit down", patchBoth(`{"spec":{"resources":{"limits":{"memory":"128Mi"}}}}`), resized("128Mi", "115"))
		Expect(warmUIDs(ctx)).To(Equal(uids), "the same pods, resized in place")
		Expect(got["warm"].kept).To(BeNumerically(">=", 0.99))
	})

	It("brings a deleted pod back under its name, empty, while the others keep theirs", func() {
		uids := warmUIDs(ctx)
		got := measure("one pod deleted", func() {
			mustRun(kubectl("delete", "pod", "warm-1", "-n", cacheNamespace, "--wait=false"))
			mustRun(kubectl("delete", "pod", podNamesOf(ctx, "today")[1], "-n", cacheNamespace, "--wait=false"))
			Eventually(func() string { return warmUIDs(ctx)["warm-1"] }).WithTimeout(wait).ShouldNot(Equal(uids["warm-1"]))
		}, nil)
		Expect(podNamesOf(ctx, "warm")).To(Equal([]string{"warm-0", "warm-1", "warm-2"}), "the same names")
		// The replaced pod's share (a third, within the hash's spread) is
		// gone; the two others keep every key.
		Expect(got["warm"].kept).To(BeNumerically(">=", 0.6))
	})

	It("measures a node drain", func() {
		// The node with the most pods of both fleets.
		count := map[string]int{}
		for _, f := range cacheFleets {
			for _, p := range fleetPodList(ctx, Default, cacheNamespace, f.name) {
				count[p.Spec.NodeName]++
			}
		}
		var target string
		for n, c := range count {
			if target == "" || c > count[target] {
				target = n
			}
		}
		measure("node drain", func() {
			mustRun(kubectl("drain", target, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m",
				"--pod-selector=app.kubernetes.io/instance in (today,warm)"))
		}, nil)
	})

	It("scales a stable fleet down from its highest ordinal: the first servers of a client's list stay", func() {
		mustRun(kubectl("patch", "memcached", "warm", "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"size":2}}`))
		fleetReadyIn(cacheNamespace, "warm", 2)
		Eventually(func() []string { return podNamesOf(ctx, "warm") }).WithTimeout(wait).Should(Equal([]string{"warm-0", "warm-1"}))
		Eventually(func(g Gomega) []string {
			mc, err := getMemcached(cacheNamespace, "warm")
			g.Expect(err).NotTo(HaveOccurred())
			return mc.Status.Servers
		}).WithTimeout(wait).Should(Equal([]string{"warm-0.warm." + cacheNamespace + ".svc:11211", "warm-1.warm." + cacheNamespace + ".svc:11211"}))
		mustRun(kubectl("patch", "memcached", "warm", "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"size":3}}`))
		fleetReadyIn(cacheNamespace, "warm", cacheSize)
	})

	It("fills a warm pod past its item memory without an OOM kill: the memory file is the item memory, counted once", func() {
		before, _ := memcachedRestarts(ctx, "warm-0")
		out := probeArgs(ctx, cacheNamespace, "fill", "fill", "warm-0.warm."+cacheNamespace+".svc.cluster.local:11211", "300")
		Expect(out).To(MatchRegexp(`fill stored=4800 evictions=[1-9]`), "every value stored, the oldest evicted: memcached's item memory was full")
		restarts, reason := memcachedRestarts(ctx, "warm-0")
		Expect(restarts).To(Equal(before), "memcached ran on, last ended: %q", reason)
	})

	It("keeps every key of both fleets through an operator restart", func() {
		got := measure("operator restart", func() {
			mustRun(kubectl("rollout", "restart", "deployment", "-n", operatorNamespace, "-l", operatorSelector))
			operatorRolledOut()
		}, nil)
		for _, f := range cacheFleets {
			Expect(got[f.name].kept).To(Equal(1.0), f.name)
		}
	})
})

// memcachedRestarts is the restart count of the memcached container of a
// fleet's pod, and why it last ended, if it did.
func memcachedRestarts(ctx context.Context, pod string) (int32, string) {
	GinkgoHelper()
	p := &corev1.Pod{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: cacheNamespace, Name: pod}, p)).To(Succeed())
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "memcached" {
			reason := ""
			if t := c.LastTerminationState.Terminated; t != nil {
				reason = t.Reason
			}
			return c.RestartCount, reason
		}
	}
	return 0, ""
}

// nodeNames names every node, for the uncordon after a drain.
func nodeNames(ctx context.Context) []string {
	nodes := &corev1.NodeList{}
	if err := k8s.List(ctx, nodes); err != nil {
		return nil
	}
	var out []string
	for _, n := range nodes.Items {
		out = append(out, n.Name)
	}
	return out
}
