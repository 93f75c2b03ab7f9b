//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The NetworkPolicies the operator writes — for a fleet (spec.networkPolicy)
// and, through the chart, for itself — enforced by the testbed's
// kube-network-policies: each allowed client gets in and each other one is
// refused, every answer a bounded attempt from a pod, measured.
var _ = Describe("The NetworkPolicies of the operator and of its fleets", Ordered, Label("network-policy"), func() {
	const (
		ns     = "e2e-netpol-fleet"
		others = "e2e-netpol-others"
	)
	ctx := context.Background()
	// role=client in the fleet's namespace (allowed), no label there, and
	// role=client in another namespace (the one metricsFrom names).
	clientPod := npClient{name: "web", ns: ns, labelled: true}
	plain := npClient{name: "plain", ns: ns}
	outsider := npClient{name: "outsider", ns: others, labelled: true}

	BeforeAll(func() {
		Expect(cluster["NETPOL"]).To(Equal("1"),
			"this testbed enforces no NetworkPolicy: start it with `make cluster-up NETPOL=1` (`make test-e2e` does)")
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		for _, n := range []string{ns, others} {
			mustRun(kubectl("delete", "namespace", n, "--ignore-not-found", "--wait", "--timeout=3m"))
		}
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(ns) + "---\n" + namespaceManifest(others)))
		// The operator's own policy: its webhook port open (the API server
		// calls it), its metrics only from the "others" namespace.
		mustRun(helm(append([]string{"install", release, chart}, installArgs(
			"--set", "test.namespace="+ns,
			"--set", "networkPolicy.enabled=true",
			"--set-json", `networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"`+others+`"}}}]`,
		)...)...))
		startClients(ctx, clientPod, plain, outsider)
	})
	AfterEach(func() { dumpOnFailure(ns, others, operatorNamespace) })
	AfterAll(func() {
		for _, n := range []string{ns, others} {
			mustRun(kubectl("delete", "namespace", n, "--ignore-not-found", "--wait=false"))
		}
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
	})

	// expect makes one bounded attempt per row and holds each answer to the
	// policy's; refusals must come from the network (a dropped SYN times
	// out), not from anything else that can fail on the way.
	type row struct {
		c        npClient
		addr     string
		memcache bool
		allowed  bool
	}
	expect := func(what string, rows ...row) {
		GinkgoHelper()
		for _, w := range rows {
			try := connectOne
			if w.memcache {
				try = reachOne
			}
			r, err := try(w.c, w.addr)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.ok).To(Equal(w.allowed), "%s → %s %s: %s", w.c, what, w.addr, r.out)
			if !r.ok {
				Expect(r.out).To(MatchRegexp(`unreachable: .*(i/o timeout|connection refused|connection reset)`))
			}
			AddReportEntry(fmt.Sprintf("%s → %s %s", w.c, what, w.addr), fmt.Sprintf("allowed=%v, %v: %s", r.ok, r.took.Round(time.Millisecond), r.out))
		}
	}

	It("keeps the operator admitting and probed behind its own policy, its metrics reachable only from metricsFrom", func() {
		Expect(mustRun(kubectl("get", "networkpolicy", "-n", operatorNamespace, "-l", "app.kubernetes.io/instance="+release, "-o", "name"))).NotTo(BeEmpty())
		operatorRolledOut() // the kubelet's readiness probes get through
		By("the API server reaches the webhooks: a dry-run create comes back defaulted")
		// Retried for a minute: a policy that shut the API server out fails
		// every attempt, a loaded machine's one slow call does not.
		Eventually(kubectl).WithArguments("create", "--dry-run=server", "-n", ns, "-f", repoRoot()+"/docs/samples/cache_v1alpha1_memcached.yaml",
			"-o", "jsonpath={.spec.image}").WithTimeout(time.Minute).Should(HaveSuffix(images["MEMCACHED_IMAGE"]), "the warning about the memory limit comes first")
		ip := operatorPods(ctx, Default)[0].Status.PodIP
		expect("operator",
			row{c: outsider, addr: ip + ":8443", allowed: true},
			row{c: clientPod, addr: ip + ":8443"},
			row{c: outsider, addr: ip + ":8081"}, // the health port: no one but the kubelet
		)
	})

	It("admits a fleet's clients by spec.networkPolicy.from and its metrics port by metricsFrom", func() {
		mustRun(kubectlApply(fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata:
  name: guarded
  namespace: %s
spec:
  size: 2
  networkPolicy:
    enabled: true
    from:
      - podSelector: {matchLabels: {role: client}}
    metricsFrom:
      - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %s}}
  monitoring:
    exporter: {enabled: true}
`, ns, others)))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/guarded", "--timeout=3m"))
		Expect(mustRun(kubectl("get", "networkpolicy", "guarded", "-n", ns, "-o", "jsonpath={.metadata.ownerReferences[0].kind}"))).To(Equal("Memcached"))
		ips := fleetPodIPs(ctx, Default, ns, "guarded")
		Expect(ips).To(HaveLen(2))
		for _, ip := range ips {
			// The policy was there before the pods: enforced from their start.
			expect("fleet",
				row{c: clientPod, addr: ip + ":11211", memcache: true, allowed: true},
				row{c: plain, addr: ip + ":11211", memcache: true},
				row{c: outsider, addr: ip + ":11211", memcache: true}, // role=client, but not the fleet's namespace
				row{c: outsider, addr: ip + ":9150", allowed: true},
				row{c: clientPod, addr: ip + ":9150"},
			)
		}
	})

	It("deletes the fleet's NetworkPolicy when it is disabled, and every client gets in again", func() {
		mustRun(kubectl("patch", "memcached", "guarded", "-n", ns, "--type=merge", "-p", `{"spec":{"networkPolicy":{"enabled":false}}}`))
		removed := time.Now()
		Eventually(func() error {
			_, err := kubectl("get", "networkpolicy", "guarded", "-n", ns)
			return err
		}).WithTimeout(time.Minute).Should(HaveOccurred())
		for _, ip := range fleetPodIPs(ctx, Default, ns, "guarded") {
			AddReportEntry("fleet policy lifted for "+ip, timeToChange(plain, ip+":11211", removed, true))
			expect("fleet",
				row{c: plain, addr: ip + ":11211", memcache: true, allowed: true},
				row{c: outsider, addr: ip + ":11211", memcache: true, allowed: true},
			)
		}
	})
})

// fleetPodIPs are the IPs of a fleet's pods that are not being deleted.
func fleetPodIPs(ctx context.Context, g Gomega, ns, name string) []string {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name})).To(Succeed())
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips
}
