//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/status"
)

const (
	zoneLabel             = "topology.kubernetes.io/zone"
	availabilityNamespace = "e2e-availability"
)

// schedulableNodes are the Ready nodes pods can go to.
func schedulableNodes(ctx context.Context, g Gomega) []corev1.Node {
	nodes := &corev1.NodeList{}
	g.Expect(k8s.List(ctx, nodes)).To(Succeed())
	var out []corev1.Node
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				out = append(out, n)
			}
		}
	}
	return out
}

// fleetPods maps a fleet's live (not terminating) pods to their nodes.
func fleetPods(ctx context.Context, g Gomega, name string) map[string]string {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(availabilityNamespace), client.MatchingLabels{"app.kubernetes.io/instance": name})).To(Succeed())
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

// fleetReady waits until the fleet's status is Ready for its generation
// with size pods listed in status.nodes, and returns them.
func fleetReady(name string, size int) []string {
	GinkgoHelper()
	return fleetReadyIn(availabilityNamespace, name, size)
}

// fleetReadyIn is fleetReady in namespace ns.
func fleetReadyIn(ns, name string, size int) []string {
	GinkgoHelper()
	var nodes []string
	Eventually(func(g Gomega) {
		mc, err := getMemcached(ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mc.Status.Conditions).To(ContainElement(And(
			HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionTrue), HaveField("ObservedGeneration", mc.Metadata.Generation))))
		g.Expect(mc.Status.Nodes).To(HaveLen(size))
		nodes = mc.Status.Nodes
	}).WithTimeout(wait).Should(Succeed())
	return nodes
}

// availability polls how many of a fleet's pods its EndpointSlices list as
// ready (what clients resolve) until stop is called, and returns the least
// seen.
func availability(ctx context.Context, ns, name string) (stop func() int) {
	var (
		mu    sync.Mutex
		least = -1
	)
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(finished)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			slices := &discoveryv1.EndpointSliceList{}
			if err := k8s.List(ctx, slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
				continue
			}
			ready := map[string]bool{}
			for _, sl := range slices.Items {
				for _, ep := range sl.Endpoints {
					if ep.TargetRef != nil && ptr.Deref(ep.Conditions.Ready, false) {
						ready[ep.TargetRef.Name] = true
					}
				}
			}
			mu.Lock()
			if least < 0 || len(ready) < least {
				least = len(ready)
			}
			mu.Unlock()
		}
	}()
	return func() int {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return least
	}
}

var loadLine = regexp.MustCompile(`load ops=(\d+) failed=(\d+) hits=(\d+) misses=(\d+) lost=(\d+) servers=(\d+)`)

type loadResult struct{ ops, failed, hits, misses, lost, servers int }

func (l loadResult) String() string {
	return fmt.Sprintf("%d ops, %d failed (%.0f per 10,000), %d keys lost, %d servers seen", l.ops, l.failed,
		1e4*float64(l.failed)/float64(max(l.ops, 1)), l.lost, l.servers)
}

func parseLoad(out string) loadResult {
	GinkgoHelper()
	m := loadLine.FindStringSubmatch(out)
	Expect(m).NotTo(BeNil(), "no load report in:\n"+out)
	n := make([]int, 6)
	for i := range n {
		n[i], _ = strconv.Atoi(m[i+1])
	}
	return loadResult{n[0], n[1], n[2], n[3], n[4], n[5]}
}

// nodeCtl stops or starts one testbed node's kubelet and containerd, as a
// machine that loses power and comes back.
func nodeCtl(action, node string) {
	GinkgoHelper()
	cmd := exec.Command(filepath.Join(repoRoot(), "test", "testbed", "node.sh"), action, node)
	cmd.Env = append(cmd.Environ(), "TESTBED_DIR="+testbedDir())
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "node.sh %s %s:\n%s", action, node, out)
}

// probeRunning waits until a probe pod runs (its load has started).
func probeRunning(ctx context.Context, pod *corev1.Pod) {
	GinkgoHelper()
	Eventually(func(g Gomega) corev1.PodPhase {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		return pod.Status.Phase
	}).WithTimeout(wait).Should(Equal(corev1.PodRunning))
}

// avoiding keeps a pod off a node (the one a spec drains).
func avoiding(node string) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{node},
			}}}},
		}}}
	}
}

func fleetManifest(name, spec string) string {
	return `apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: ` + name + `, namespace: ` + availabilityNamespace + `}
spec:
` + spec
}

var _ = Describe("availability on several nodes", Ordered, Label("multi-node"), func() {
	ctx := context.Background()
	var nodes []corev1.Node

	BeforeAll(func() {
		nodes = schedulableNodes(ctx, Default)
		Expect(len(nodes)).To(BeNumerically(">=", 3), "these specs need 3 nodes: start the testbed with `make cluster-up NODES=3` (`make test-e2e` does)")
		zones := map[string]bool{}
		for _, n := range nodes {
			zones[n.Labels[zoneLabel]] = true
		}
		Expect(len(zones)).To(BeNumerically(">=", 2), "nodes in two zones at least")
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", availabilityNamespace, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(availabilityNamespace)))
		mustRun(helm(append([]string{"install", release, chart}, installArgs(
			"--values", "charts/memcached-operator/ci/ha-values.yaml",
			"--set", "test.namespace="+availabilityNamespace,
		)...)...))
	})
	AfterEach(func() {
		dumpOnFailure(availabilityNamespace)
		// Whatever a spec did to a node, the next one starts with every node
		// serving and no fleet of its own: a drain would wait on the budget
		// of a fleet whose pods cannot move (hard anti-affinity, a zone).
		for _, n := range nodes {
			_, _ = kubectl("uncordon", n.Name)
		}
		mustRun(kubectl("delete", "memcached", "--all", "-n", availabilityNamespace, "--wait", "--timeout=3m"))
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(availabilityNamespace), client.MatchingLabels{"app.kubernetes.io/name": "memcached"})).To(Succeed())
			g.Expect(pods.Items).To(BeEmpty())
		}).WithTimeout(wait).Should(Succeed())
	})
	AfterAll(func() {
		mustRun(kubectl("delete", "namespace", availabilityNamespace, "--ignore-not-found", "--wait=false"))
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		caInjectorLeading(ctx)
	})

	It("puts one pod of a hard anti-affinity fleet on each node; the pod with no node left is Pending and the status says why", func() {
		mustRun(kubectlApply(fleetManifest("spread", "  size: 3\n  antiAffinityPreset: hard\n")))
		fleetReady("spread", 3)
		placed := fleetPods(ctx, Default, "spread")
		used := map[string]bool{}
		for _, n := range placed {
			used[n] = true
		}
		Expect(used).To(HaveLen(3), "one pod per node: %v", placed)

		mustRun(kubectl("patch", "memcached", "spread", "-n", availabilityNamespace, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"size":%d}}`, len(nodes)+1)))
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(availabilityNamespace), client.MatchingLabels{"app.kubernetes.io/instance": "spread"})).To(Succeed())
			pending := 0
			for _, p := range pods.Items {
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
						pending++
					}
				}
			}
			g.Expect(pending).To(Equal(1))
			mc, err := getMemcached(availabilityNamespace, "spread")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mc.Status.Nodes).To(HaveLen(len(nodes)), "the scheduled pods still serve")
			g.Expect(mc.Status.Conditions).To(ContainElement(And(HaveField("Type", "Ready"), HaveField("Status", metav1.ConditionFalse),
				HaveField("Reason", "PodsUnschedulable"), HaveField("Message", ContainSubstring("anti-affinity")))), "the status says why")
		}).WithTimeout(wait).Should(Succeed())
	})

	It("holds a zone spread constraint's skew as the fleet grows and shrinks", func() {
		mustRun(kubectlApply(fleetManifest("zoned", `  size: 4
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: `+zoneLabel+`
      whenUnsatisfiable: DoNotSchedule
`)))
		zoneOf := map[string]string{}
		for _, n := range nodes {
			zoneOf[n.Name] = n.Labels[zoneLabel]
		}
		skew := func(size int) {
			GinkgoHelper()
			fleetReady("zoned", size)
			perZone := map[string]int{}
			for _, z := range zoneOf {
				perZone[z] = 0
			}
			for _, n := range fleetPods(ctx, Default, "zoned") {
				perZone[zoneOf[n]]++
			}
			least, most := size, 0
			for _, c := range perZone {
				least, most = min(least, c), max(most, c)
			}
			Expect(most-least).To(BeNumerically("<=", 1), "pods per zone %v", perZone)
			AddReportEntry(fmt.Sprintf("pods per zone at size %d", size), fmt.Sprint(perZone))
		}
		skew(4)
		mustRun(kubectl("patch", "memcached", "zoned", "-n", availabilityNamespace, "--type=merge", "-p", `{"spec":{"size":7}}`))
		skew(7)
		// Left to itself the ReplicaSet would remove the pods of zone-b's one
		// node first (it holds three of seven) and empty the zone; the
		// operator's pod-deletion-cost marks keep it.
		mustRun(kubectl("patch", "memcached", "zoned", "-n", availabilityNamespace, "--type=merge", "-p", `{"spec":{"size":3}}`))
		Eventually(func(g Gomega) map[string]string { return fleetPods(ctx, g, "zoned") }).WithTimeout(wait).Should(HaveLen(3))
		skew(3)
	})

	It("drains a node one fleet pod at a time, the PodDisruptionBudget waiting for each replacement, under client load", func() {
		const size = 4
		mustRun(kubectlApply(fleetManifest("drained", "  size: 4\n")))
		fleetReady("drained", size)
		// The node with the most of the fleet's pods: with 4 pods on 3 nodes, two at least.
		count := map[string]int{}
		for _, n := range fleetPods(ctx, Default, "drained") {
			count[n]++
		}
		var target string
		for n, c := range count {
			if target == "" || c > count[target] {
				target = n
			}
		}
		Expect(count[target]).To(BeNumerically(">=", 2), "a node with two pods: %v", count)

		stop := availability(ctx, availabilityNamespace, "drained")
		load := startProbe(ctx, availabilityNamespace, "load", avoiding(target), "load", "drained."+availabilityNamespace+".svc.cluster.local", "11211", "100", "5m")
		probeRunning(ctx, load)
		start := time.Now()
		// Only the fleet's pods are evicted (the node is cordoned all the
		// same): evicting cert-manager's pods here left the next suite's
		// fresh install with a caBundle not yet injected.
		mustRun(kubectl("drain", target, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m",
			"--pod-selector=app.kubernetes.io/instance=drained"))
		drainTook := time.Since(start)
		nodesAfter := fleetReady("drained", size)
		least := stop()
		stopProbe(ctx, load)
		res := parseLoad(probeLog(ctx, load))
		AddReportEntry("drain of "+target, fmt.Sprintf("%d fleet pods moved in %s; least pods ready during it %d of %d; load: %s",
			count[target], drainTook.Round(time.Second), least, size, res))
		Expect(least).To(BeNumerically(">=", size-1), "never more than one server away at a time")
		Expect(res.failed*size).To(BeNumerically("<=", res.ops), "errors within one server's share")
		for pod, n := range fleetPods(ctx, Default, "drained") {
			Expect(n).NotTo(Equal(target), pod)
			Expect(nodesAfter).To(ContainElement(pod), "status.nodes lists the moved pods")
		}
	})

	It("rolls a template change one pod at a time under client load, never below size pods serving", func() {
		const size = 3
		mustRun(kubectlApply(fleetManifest("rolled", "  size: 3\n")))
		before := fleetReady("rolled", size)
		stop := availability(ctx, availabilityNamespace, "rolled")
		load := startProbe(ctx, availabilityNamespace, "load", nil, "load", "rolled."+availabilityNamespace+".svc.cluster.local", "11211", "100", "5m")
		probeRunning(ctx, load)
		mustRun(kubectl("patch", "memcached", "rolled", "-n", availabilityNamespace, "--type=merge", "-p", `{"spec":{"podAnnotations":{"rollout":"1"}}}`))
		after := fleetReady("rolled", size)
		for _, pod := range before {
			Expect(after).NotTo(ContainElement(pod), "every pod replaced")
		}
		stopProbe(ctx, load)
		res := parseLoad(probeLog(ctx, load))
		least := stop()
		AddReportEntry("rollout under load", fmt.Sprintf("least pods ready %d of %d; load: %s", least, size, res))
		Expect(least).To(BeNumerically(">=", size), "maxSurge 1, maxUnavailable 0: a new pod serves before an old one leaves, so no sample sees fewer than size")
		Expect(res.failed*size).To(BeNumerically("<=", res.ops), "errors within one server's share")
	})

	It("replaces a lost node's pods elsewhere within nodeLossTolerationSeconds, and the node rejoins; a stable fleet's pod waits for it under its name", func() {
		const size = 3
		mustRun(kubectlApply(fleetManifest("survivor", "  size: 3\n  antiAffinityPreset: soft\n  nodeLossTolerationSeconds: 10\n")))
		// One stable pod on every node (hard anti-affinity), so the lost node has one.
		mustRun(kubectlApply(fleetManifest("anchored", "  size: 3\n  workload: StatefulSet\n  antiAffinityPreset: hard\n  nodeLossTolerationSeconds: 10\n")))
		fleetReady("survivor", size)
		fleetReady("anchored", size)
		// A worker, not the node that runs the control plane's processes.
		var lost string
		var lostPods []string
		for pod, n := range fleetPods(ctx, Default, "survivor") {
			if n != nodes[0].Name && (lost == "" || n == lost) {
				lost = n
				lostPods = append(lostPods, pod)
			}
		}
		Expect(lost).NotTo(BeEmpty())
		start := time.Now()
		nodeCtl("stop", lost)
		DeferCleanup(func() { nodeCtl("start", lost) })
		var notReadyAfter time.Duration
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: lost}, n)).To(Succeed())
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady {
					g.Expect(c.Status).NotTo(Equal(corev1.ConditionTrue))
				}
			}
			notReadyAfter = time.Since(start)
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
		var replacedAfter time.Duration
		Eventually(func(g Gomega) {
			mc, err := getMemcached(availabilityNamespace, "survivor")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mc.Status.Nodes).To(HaveLen(size))
			g.Expect(mc.Status.Nodes).NotTo(ContainElements(lostPods), "status.nodes drops the lost pods")
			for pod, n := range fleetPods(ctx, g, "survivor") {
				if !slices.Contains(lostPods, pod) {
					g.Expect(n).NotTo(Equal(lost))
				}
			}
			replacedAfter = time.Since(start)
		}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("node loss", fmt.Sprintf("%s stopped: NotReady after %s, its %d fleet pod(s) replaced elsewhere after %s (toleration 10 s)",
			lost, notReadyAfter.Round(time.Second), len(lostPods), replacedAfter.Round(time.Second)))
		Expect(replacedAfter-notReadyAfter).To(BeNumerically("<", 90*time.Second),
			"replaced within the toleration (10 s) plus the taint manager's and the ReplicaSet's own delay")

		// The stable fleet's pod on the lost node: out of status.servers, and
		// not started anywhere else (a StatefulSet never runs two pods of one
		// name), even now that the Deployment's have moved.
		var anchored string
		for i := range size {
			pod := &corev1.Pod{}
			name := fmt.Sprintf("anchored-%d", i)
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: availabilityNamespace, Name: name}, pod)).To(Succeed())
			if pod.Spec.NodeName == lost {
				anchored = name
			}
		}
		Expect(anchored).NotTo(BeEmpty(), "hard anti-affinity put one stable pod on every node")
		servers := func(g Gomega) []string {
			mc, err := getMemcached(availabilityNamespace, "anchored")
			g.Expect(err).NotTo(HaveOccurred())
			return mc.Status.Servers
		}
		Eventually(servers).WithTimeout(wait).Should(And(HaveLen(size-1),
			Not(ContainElement(HavePrefix(anchored+".")))), "status.servers drops the pod its node no longer runs")
		Expect(fleetPods(ctx, Default, "anchored")).NotTo(HaveKeyWithValue(anchored, Not(Equal(lost))), "not started on another node")

		nodeCtl("start", lost)
		Eventually(func(g Gomega) {
			g.Expect(slices.ContainsFunc(schedulableNodes(ctx, g), func(n corev1.Node) bool { return n.Name == lost })).To(BeTrue())
		}).WithTimeout(3*time.Minute).Should(Succeed(), "the node rejoins")
		fleetReady("survivor", size)
		fleetReady("anchored", size)
		Eventually(servers).WithTimeout(wait).Should(ContainElement(HavePrefix(anchored+".")), "back under its name once its node returns")
	})

	It("keeps admitting while the node of the leading operator replica is drained (two replicas)", func() {
		var leader, node string
		Eventually(func(g Gomega) {
			g.Expect(operatorPods(ctx, g)).To(HaveLen(2))
			pod := operatorLeader(ctx, g)
			leader, node = pod.Name, pod.Spec.NodeName
		}).WithTimeout(wait).Should(Succeed())

		stopAdmissions := startAdmissions(ctx, availabilityNamespace)
		start := time.Now()
		mustRun(kubectl("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m",
			"--pod-selector="+operatorSelector))
		operatorRolledOut()
		Eventually(func(g Gomega) string { return operatorLeader(ctx, g).Name }).WithTimeout(wait).ShouldNot(Equal(leader), "leadership handed over")
		took := time.Since(start)
		admissions := stopAdmissions()
		AddReportEntry("operator drain", fmt.Sprintf("leader %s on %s; handed over and rolled out in %s; %s",
			leader, node, took.Round(time.Second), admissions))
		Expect(admissions.failed).To(BeZero(), "first failure: %v", admissions.first)
		Expect(admissions.attempts).To(BeNumerically(">", 10))
	})
})

// caInjectorLeading waits until a ready cainjector pod holds cert-manager's
// cainjector lease and renews it. The node-loss spec can take the leader
// with its node; the replacement waits out the old lease, and until then no
// webhook configuration gets its CA: the next suite's fresh install would
// meet "x509: certificate signed by unknown authority" (seen in CI). The
// cluster is left as whole as the suite found it.
func caInjectorLeading(ctx context.Context) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		lease := &coordinationv1.Lease{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "cert-manager-cainjector-leader-election"}, lease)).To(Succeed())
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		pods := &corev1.PodList{}
		g.Expect(k8s.List(ctx, pods, client.InNamespace("cert-manager"), client.MatchingLabels{"app.kubernetes.io/component": "cainjector"})).To(Succeed())
		leading := false
		for i := range pods.Items {
			p := &pods.Items[i]
			leading = leading || (p.DeletionTimestamp == nil && p.Name != "" && strings.HasPrefix(holder, p.Name) && status.PodReady(p))
		}
		g.Expect(leading).To(BeTrue(), "cainjector's lease is held by %q, no ready cainjector pod", holder)
		g.Expect(lease.Spec.RenewTime).NotTo(BeNil())
		g.Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", time.Now().Add(-30*time.Second)), "the lease is renewed")
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
}
