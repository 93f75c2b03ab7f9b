//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
)

// NetworkPolicy is enforced on the testbed (make cluster-up NETPOL=1): a
// memcached server admits, on its port, only pods of its namespace with the
// label role=client. Every client tries one memcached set/get with a bounded
// timeout — a refusal is measured, never assumed — from the server's node
// and, on a cluster of several nodes, from another node. The policy's
// deletion lets the refused clients in again. How long each change took to
// be enforced is printed.
var _ = Describe("NetworkPolicy enforcement", Ordered, Label("network-policy"), func() {
	const (
		// A dropped SYN shows as a connect timeout: long enough for a round
		// trip on a loaded 2-core machine, short enough to poll with.
		reachTimeout = 3 * time.Second
		port         = 11211
		// Enforcement normally follows within a second; a minute means broken.
		enforceTimeout = time.Minute
		poll           = 200 * time.Millisecond
	)
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
		for _, c := range clients {
			labels := map[string]string{"app": "np-client"}
			if c.labelled {
				labels["role"] = "client"
			}
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.ns, Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  onNode(c.node),
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					AutomountServiceAccountToken:  ptr.To(false),
					Containers: []corev1.Container{{
						Name: "probe", Image: images["PROBE_IMAGE"], ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{"serve", ":8080"}, SecurityContext: restrictedContext(65532),
					}},
				},
			}
			Expect(k8s.Create(ctx, p)).To(Succeed())
		}

		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(server), server)).To(Succeed())
			g.Expect(podIsReady(server)).To(BeTrue(), "server not Ready")
			for _, c := range clients {
				p := &corev1.Pod{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: c.name}, p)).To(Succeed())
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "client %s", c.name)
			}
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
		for _, r := range reachAll(clients, addr(), reachTimeout) {
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
		// The first refused attempt started after the policy took effect; the
		// one before it, a fraction of a second earlier, still got through.
		var refusedAt time.Time
		Eventually(func(g Gomega) {
			r, err := reachOne(unlabelled, addr(), reachTimeout)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.ok).To(BeFalse(), "the unlabelled client still gets through")
			refusedAt = r.started
		}).WithTimeout(enforceTimeout).WithPolling(poll).Should(Succeed())
		took := refusedAt.Sub(created)
		GinkgoWriter.Printf("policy enforced %v after it was created\n", took.Round(time.Millisecond))
		AddReportEntry("NetworkPolicy enforced after create", took.String())

		for _, r := range reachAll(clients, addr(), reachTimeout) {
			if r.client.allowed {
				Expect(r.ok).To(BeTrue(), "%s is allowed by the policy: %s", r.client.name, r.out)
				continue
			}
			Expect(r.ok).To(BeFalse(), "%s is not allowed by the policy, yet it got through", r.client.name)
			// Refused by the network (a dropped SYN times out; a reset is
			// refused), not by anything else that can go wrong on the way.
			Expect(r.out).To(MatchRegexp(`unreachable: .*(i/o timeout|connection refused|connection reset)`), r.client.name)
			Expect(r.took).To(BeNumerically("<", reachTimeout+2*time.Second), "%s: the refusal is bounded", r.client.name)
			GinkgoWriter.Printf("%s refused after %v: %s\n", r.client.name, r.took.Round(time.Millisecond), r.out)
		}
	})

	It("lets the refused clients in again once the policy is deleted", func() {
		Expect(policy).NotTo(BeNil(), "the previous spec made the policy")
		deleted := time.Now()
		Expect(k8s.Delete(ctx, policy)).To(Succeed())
		var admittedAt time.Time
		Eventually(func(g Gomega) {
			r, err := reachOne(unlabelled, addr(), reachTimeout)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.ok).To(BeTrue(), "the unlabelled client is still refused: %s", r.out)
			admittedAt = r.started
		}).WithTimeout(enforceTimeout).WithPolling(poll).Should(Succeed())
		took := admittedAt.Sub(deleted)
		GinkgoWriter.Printf("policy lifted %v after it was deleted\n", took.Round(time.Millisecond))
		AddReportEntry("NetworkPolicy lifted after delete", took.String())
		for _, r := range reachAll(clients, addr(), reachTimeout) {
			Expect(r.ok).To(BeTrue(), "%s after the policy's deletion: %s", r.client.name, r.out)
		}
	})
})

// npClient is one client pod of the NetworkPolicy spec and what the policy
// says of it.
type npClient struct {
	name, ns, node    string
	labelled, allowed bool
}

func (c npClient) String() string { return c.ns + "/" + c.name + "@" + c.node }

type reachResult struct {
	client  npClient
	ok      bool
	out     string
	started time.Time
	took    time.Duration
}

// reachOne runs one bounded memcached round trip from the client's pod to
// addr (`probe reach`, through kubectl exec). ok is false only when the probe
// itself says the server was unreachable; the error is for anything else
// (the exec failed), which says nothing about the policy.
func reachOne(c npClient, addr string, timeout time.Duration) (reachResult, error) {
	r := reachResult{client: c, started: time.Now()}
	out, err := kubectl("exec", "-n", c.ns, c.name, "--", "/probe", "reach", addr, timeout.String())
	r.took = time.Since(r.started)
	r.out = strings.TrimSpace(out)
	switch {
	case err == nil && strings.Contains(r.out, "memcached set/get ok"):
		r.ok = true
	case strings.Contains(r.out, "unreachable:"):
		r.ok = false
	default:
		return r, fmt.Errorf("exec in %s: %w", c, err)
	}
	return r, nil
}

// reachAll tries every client at once (a refused one takes the whole timeout).
func reachAll(clients []npClient, addr string, timeout time.Duration) []reachResult {
	GinkgoHelper()
	results := make([]reachResult, len(clients))
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = reachOne(c, addr, timeout)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
	return results
}

// podIsReady reports whether the pod's Ready condition is True.
func podIsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
