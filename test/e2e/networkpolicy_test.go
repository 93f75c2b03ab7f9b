//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/status"
)

// NetworkPolicy is enforced on the testbed (make cluster-up NETPOL=1): a
// memcached server admits, on its port, only pods of its namespace with the
// label role=client. Every client tries one memcached set/get with a bounded
// timeout — a refusal is measured, never assumed — from the server's node
// and, on a cluster of several nodes, from another node. The policy's
// deletion lets the refused clients in again. How long each change took to
// be enforced is printed.
var _ = Describe("NetworkPolicy enforcement", Ordered, Label("network-policy"), func() {
	const port = 11211
	var (
		ctx        = context.Background()
		ns, other  string
		serverIP   string
		serverNode string
		clients    []npClient
		// The client whose refusal, then admission, times the enforcement.
		unlabelled npClient
		policy     *networkingv1.NetworkPolicy
	)

	BeforeAll(func() {
		Expect(cluster["NETPOL"]).To(Equal("1"),
			"this testbed enforces no NetworkPolicy: start it with `make cluster-up NETPOL=1` (`make test-e2e` does)")
		Expect(images["MEMCACHED_IMAGE"]).NotTo(BeEmpty(), "images.env has no MEMCACHED_IMAGE")
		for _, name := range []*string{&ns, &other} {
			n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				GenerateName: "netpol-",
				Labels:       map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
			}}
			Expect(k8s.Create(ctx, n)).To(Succeed())
			*name = n.Name
			DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed()) })
		}

		nodes := schedulableNodes(ctx, Default)
		Expect(nodes).NotTo(BeEmpty())
		serverNode = nodes[0].Name
		server := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: ns, Labels: map[string]string{"app": "np-server"}},
			Spec: corev1.PodSpec{
				NodeSelector:                  onNode(serverNode),
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				AutomountServiceAccountToken:  ptr.To(false),
				Containers: []corev1.Container{{
					Name: "memcached", Image: images["MEMCACHED_IMAGE"], ImagePullPolicy: corev1.PullIfNotPresent,
					Args:            []string{"-p", fmt.Sprint(port), "-U", "0", "-m", "16"},
					Ports:           []corev1.ContainerPort{{ContainerPort: port}},
					SecurityContext: restrictedContext(11211),
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
						PeriodSeconds: 1,
					},
				}},
			},
		}
		Expect(k8s.Create(ctx, server)).To(Succeed())

		// Idle probe pods (an HTTP server nobody calls) that the spec execs
		// its one-shot client in.
		unlabelled = npClient{name: "unlabelled", ns: ns, node: serverNode}
		clients = []npClient{
			{name: "labelled", ns: ns, node: serverNode, labelled: true, allowed: true},
			unlabelled,
			{name: "other-namespace", ns: other, node: serverNode, labelled: true},
		}
		if len(nodes) > 1 {
			clients = append(clients,
				npClient{name: "labelled-remote", ns: ns, node: nodes[1].Name, labelled: true, allowed: true},
				npClient{name: "unlabelled-remote", ns: ns, node: nodes[1].Name})
		}
		startClients(ctx, clients...)
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(server), server)).To(Succeed())
			g.Expect(status.PodReady(server)).To(BeTrue(), "server not Ready")
		}).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		serverIP = server.Status.PodIP
		Expect(serverIP).NotTo(BeEmpty())
		GinkgoWriter.Printf("server %s on %s; clients: %v\n", serverIP, serverNode, clients)
	})
	AfterEach(func() {
		dumpOnFailure(ns, other)
		if CurrentSpecReport().Failed() {
			for _, c := range clients {
				out, _ := kubectl("logs", "-n", c.ns, c.name, "--tail=20")
				AddReportEntry("log of client "+c.String(), out)
			}
			logs, _ := filepath.Glob(filepath.Join(testbedDir(), "logs", "kube-network-policies*.log"))
			for _, f := range logs {
				b, _ := os.ReadFile(f)
				lines := strings.Split(string(b), "\n")
				AddReportEntry(filepath.Base(f), strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})

	addr := func() string { return fmt.Sprintf("%s:%d", serverIP, port) }

	It("lets every client reach the server while no policy selects it", func() {
		for _, r := range reachAll(clients, addr()) {
			Expect(r.ok).To(BeTrue(), "%s before any policy: %s", r.client.name, r.out)
		}
	})

	It("admits only the labelled pods of the namespace once a policy selects the server", func() {
		policy = &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "clients-only", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "np-server"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{
					From: []networkingv1.NetworkPolicyPeer{{
						PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
					}},
					Ports: []networkingv1.NetworkPolicyPort{{
						Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port)),
					}},
				}},
			},
		}
		created := time.Now()
		Expect(k8s.Create(ctx, policy)).To(Succeed())
		// The policy was in force when the first refused attempt dialled, and
		// not yet when the last admitted one did: an upper and a lower bound
		// (attempts are an exec apart, a few hundred milliseconds).
		took := timeToChange(unlabelled, addr(), created, false)
		GinkgoWriter.Printf("policy enforced %s after it was created%s\n", took, enforcerSync(serverNode, created))
		AddReportEntry("NetworkPolicy enforced after create", took)

		for _, r := range reachAll(clients, addr()) {
			if r.client.allowed {
				Expect(r.ok).To(BeTrue(), "%s is allowed by the policy: %s", r.client.name, r.out)
				continue
			}
			Expect(r.ok).To(BeFalse(), "%s is not allowed by the policy, yet it got through", r.client.name)
			// Refused by the network (a dropped SYN times out; a reset is
			// refused), not by anything else that can go wrong on the way.
			Expect(r.out).To(MatchRegexp(`unreachable: .*(i/o timeout|connection refused|connection reset)`), r.client.name)
			Expect(r.took).To(BeNumerically("<", reachTimeout+time.Second), "%s: the refusal is bounded", r.client.name)
			GinkgoWriter.Printf("%s refused after %v: %s\n", r.client.name, r.took.Round(time.Millisecond), r.out)
		}
	})

	// Every new connection of a pod a policy selects goes to the node's
	// enforcer, also when the other end is no pod (here the API server,
	// through its ClusterIP): v0.8.0 unpatched dies on the first such packet
	// without NRI, and its node then drops all traffic of selected pods (fail
	// closed). Only the remote client's node sees such a packet: on the API
	// server's own node the packet is delivered locally, past the enforcer's
	// postrouting hook. Checked: with node 2's enforcer built without the
	// patch's nil check, this spec fails (the remote client times out).
	It("keeps enforcing while selected pods talk to addresses that are no pod's", func() {
		isolated := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "clients-isolated", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			},
		}
		Expect(k8s.Create(ctx, isolated)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, isolated))).To(Succeed()) })
		for _, c := range clients {
			if c.ns != ns || !c.labelled {
				continue
			}
			// Anonymous, so refused by the API server: an answer all the same.
			// Retried, as an exec on a loaded machine can fail on its own: an
			// enforcer that died on the first packet drops every later one.
			Eventually(kubectl).WithArguments("exec", "-n", c.ns, c.name, "--", "/probe", "status", "https://kubernetes.default.svc/").
				WithTimeout(time.Minute).Should(MatchRegexp(`status 40[13]`), "%s to the API server", c)
		}
		for _, r := range reachAll(clients, addr()) {
			Expect(r.ok).To(Equal(r.client.allowed), "%s: %s", r.client.name, r.out)
		}
	})

	It("lets the refused clients in again once the policy is deleted", func() {
		Expect(policy).NotTo(BeNil(), "the previous spec made the policy")
		deleted := time.Now()
		Expect(k8s.Delete(ctx, policy)).To(Succeed())
		took := timeToChange(unlabelled, addr(), deleted, true)
		GinkgoWriter.Printf("policy lifted %s after it was deleted%s\n", took, enforcerSync(serverNode, deleted))
		AddReportEntry("NetworkPolicy lifted after delete", took)
		for _, r := range reachAll(clients, addr()) {
			Expect(r.ok).To(BeTrue(), "%s after the policy's deletion: %s", r.client.name, r.out)
		}
	})
})

// reachTimeout bounds every attempt of the NetworkPolicy spec. A dropped SYN
// shows as a connect timeout: long enough for a round trip on a loaded
// 2-core machine, short enough to poll with.
const reachTimeout = 3 * time.Second

// npClient is one client pod of the NetworkPolicy spec and what the policy
// says of it.
type npClient struct {
	name, ns, node    string
	labelled, allowed bool
}

func (c npClient) String() string { return c.ns + "/" + c.name + "@" + c.node }

// reachResult is one `probe reach`: its answer, when the probe dialled (the
// pod's clock is the machine's, the test's too) and how long the attempt
// took inside the pod (kubectl exec's own time left out).
type reachResult struct {
	client  npClient
	ok      bool
	out     string
	dialled time.Time
	took    time.Duration
}

// kubectl may add a line of its own (the exit code) after the probe's.
var reachWhen = regexp.MustCompile(`(?m); dialled (\S+) took (\S+)$`)

// startClients starts an idle probe pod (an HTTP server nobody calls) for
// each client, labelled role=client when it is labelled, on its node when
// it names one, and waits until they run: a spec execs its one-shot
// attempts in them.
func startClients(ctx context.Context, clients ...npClient) {
	GinkgoHelper()
	for _, c := range clients {
		labels := map[string]string{"app": "np-client"}
		if c.labelled {
			labels["role"] = "client"
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.ns, Labels: labels},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				AutomountServiceAccountToken:  ptr.To(false),
				Containers: []corev1.Container{{
					Name: "probe", Image: images["PROBE_IMAGE"], ImagePullPolicy: corev1.PullIfNotPresent,
					Args: []string{"serve", ":8080"}, SecurityContext: restrictedContext(65532),
				}},
			},
		}
		if c.node != "" {
			p.Spec.NodeSelector = onNode(c.node)
		}
		Expect(k8s.Create(ctx, p)).To(Succeed())
	}
	Eventually(func(g Gomega) {
		for _, c := range clients {
			p := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name}, p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "client %s", c.name)
		}
	}).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// reachOne runs one bounded memcached round trip from the client's pod to
// addr (`probe reach`, through kubectl exec). ok is false only when the probe
// itself says the server was unreachable; the error is for anything else
// (the exec failed), which says nothing about the policy.
func reachOne(c npClient, addr string) (reachResult, error) { return attempt(c, "reach", addr) }

// connectOne is reachOne for a port that speaks something else than
// memcached: ok when a TCP connection is accepted (`probe connect`).
func connectOne(c npClient, addr string) (reachResult, error) { return attempt(c, "connect", addr) }

func attempt(c npClient, mode, addr string) (reachResult, error) {
	r := reachResult{client: c}
	out, err := kubectl("exec", "-n", c.ns, c.name, "--", "/probe", mode, addr, reachTimeout.String())
	r.out = strings.TrimSpace(out)
	switch {
	case err == nil && (strings.Contains(r.out, "memcached set/get ok") || strings.Contains(r.out, "connected")):
		r.ok = true
	case strings.Contains(r.out, "unreachable:"):
		r.ok = false
	default:
		return r, fmt.Errorf("exec in %s: %w", c, err)
	}
	m := reachWhen.FindStringSubmatch(r.out)
	if m == nil {
		return r, fmt.Errorf("probe in %s: no dial time in %q", c, r.out)
	}
	var err1, err2 error
	r.dialled, err1 = time.Parse(time.RFC3339Nano, m[1])
	r.took, err2 = time.ParseDuration(m[2])
	if err1 != nil || err2 != nil {
		return r, fmt.Errorf("probe in %s: %q: %w", c, r.out, errors.Join(err1, err2))
	}
	return r, nil
}

// timeToChange tries c until an attempt's answer is want (a minute at most)
// and says when, after since, the change took effect: by the time the first
// such attempt dialled, and after the last attempt before it, if any.
func timeToChange(c npClient, addr string, since time.Time, want bool) string {
	GinkgoHelper()
	var last, first *reachResult
	Eventually(func(g Gomega) {
		r, err := reachOne(c, addr)
		g.Expect(err).NotTo(HaveOccurred())
		if r.ok != want {
			last = &r
		}
		g.Expect(r.ok).To(Equal(want), "%s: %s", c.name, r.out)
		first = &r
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	ms := func(t time.Time) string { return t.Sub(since).Round(time.Millisecond).String() }
	if last == nil {
		return "within " + ms(first.dialled) + " (its first attempt)"
	}
	return "within " + ms(first.dialled) + ", after " + ms(last.dialled)
}

// klogSync is the line an enforcer logs when it starts to rewrite its rules.
var klogSync = regexp.MustCompile(`(?m)^I(\d{4} \d\d:\d\d:\d\d\.\d+)\s.*"Syncing nftables rules"$`)

// enforcerSync finds, in the log of node's enforcer (the testbed's logs
// folder), its first rule sync after since: a finer figure than the probes'
// (an exec apart), said as ", its rules resynced ... later". Empty when the
// log is not on this machine or has no such line.
func enforcerSync(node string, since time.Time) string {
	name := "kube-network-policies.log"
	if node != "testbed" {
		name = "kube-network-policies-" + node + ".log"
	}
	b, err := os.ReadFile(filepath.Join(testbedDir(), "logs", name))
	if err != nil {
		return ""
	}
	for _, m := range klogSync.FindAllStringSubmatch(string(b), -1) {
		// klog's header has no year, in the local time zone (the daemons run
		// on this machine, with its zone).
		t, err := time.ParseInLocation("2006 0102 15:04:05.000000", fmt.Sprintf("%d %s", since.Year(), m[1]), time.Local)
		if err == nil && !t.Before(since) {
			return fmt.Sprintf(" (the enforcer on %s resynced its rules %v after)", node, t.Sub(since).Round(time.Millisecond))
		}
	}
	return ""
}

// reachAll tries every client at once (a refused one takes the whole timeout).
func reachAll(clients []npClient, addr string) []reachResult {
	GinkgoHelper()
	results := make([]reachResult, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = reachOne(c, addr)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
	return results
}
