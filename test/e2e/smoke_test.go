//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The smoke test of the testbed itself: a real kubelet runs real containers,
// kube-proxy routes ClusterIPs, CoreDNS answers Service names, memcached
// answers set/get, and cert-manager issues a certificate. On a cluster of
// several nodes (make cluster-up NODES=3) every node runs a pod, and every
// node reaches the next one's pod directly, through a Service and by name.
// Everything runs in a namespace that enforces the "restricted" Pod Security
// Standard.
var _ = Describe("testbed cluster", Ordered, Label("cluster-smoke"), func() {
	const (
		timeout = 2 * time.Minute
		poll    = 500 * time.Millisecond
	)
	var (
		ctx   = context.Background()
		ns    string
		probe string
	)

	BeforeAll(func() {
		probe = images["PROBE_IMAGE"]
		Expect(probe).NotTo(BeEmpty(), "images.env has no PROBE_IMAGE")
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			GenerateName: "smoke-",
			Labels:       map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
		}}
		Expect(k8s.Create(ctx, n)).To(Succeed())
		ns = n.Name
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed())
		})
	})

	webPodSpec := func() corev1.PodSpec {
		return corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "web", Image: probe, ImagePullPolicy: corev1.PullIfNotPresent,
				Args:            []string{"serve", ":8080"},
				Ports:           []corev1.ContainerPort{{ContainerPort: 8080}},
				SecurityContext: restrictedContext(65532),
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
		}
	}
	podReady := func(name string) func(Gomega) {
		return func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			ready := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			g.Expect(ready).To(BeTrue(), "pod %s not Ready", name)
		}
	}
	// runProbeOn runs the probe image as a pod to completion on node (any
	// node when empty) and returns the last line of its log: its result
	// (earlier lines are the attempts it retried).
	runProbeOn := func(node, name string, args ...string) string {
		GinkgoHelper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				NodeSelector:                  onNode(node),
				RestartPolicy:                 corev1.RestartPolicyNever,
				TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{
					Name: "probe", Image: probe, ImagePullPolicy: corev1.PullIfNotPresent,
					Args: args, SecurityContext: restrictedContext(65532),
				}},
			},
		}
		Expect(k8s.Create(ctx, p)).To(Succeed())
		logs := func() string {
			b, err := clientset.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return "(no logs: " + err.Error() + ")"
			}
			return string(b)
		}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Succeed())
			if p.Status.Phase == corev1.PodFailed {
				StopTrying(fmt.Sprintf("probe %s failed:\n%s", name, logs())).Now()
			}
			g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		lines := strings.Split(strings.TrimSpace(logs()), "\n")
		return lines[len(lines)-1]
	}
	runProbe := func(name string, args ...string) string {
		GinkgoHelper()
		return runProbeOn("", name, args...)
	}

	It("runs a pod", func() {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "single", Namespace: ns, Labels: map[string]string{"app": "single"}}, Spec: webPodSpec()}
		Expect(k8s.Create(ctx, p)).To(Succeed())
		Eventually(podReady("single")).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("rejects a pod that violates the restricted Pod Security Standard", func() {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: ns}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: probe, SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
		}}
		err := k8s.Create(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "expected PodSecurity to forbid it, got %v", err)
	})

	It("scales a Deployment", func() {
		labels := map[string]string{"app": "web"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: webPodSpec()},
			},
		}
		Expect(k8s.Create(ctx, d)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(BeNumerically("==", 1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())

		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To[int32](3)
		Expect(k8s.Patch(ctx, d, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(BeNumerically("==", 3))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	})

	It("carries pod-to-pod traffic", func() {
		p := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "single"}, p)).To(Succeed())
		Expect(p.Status.PodIP).NotTo(BeEmpty())
		out := runProbe("pod-to-pod", "http", "http://"+p.Status.PodIP+":8080/")
		Expect(out).To(ContainSubstring("single"))
	})

	var webIP string
	It("carries pod-to-ClusterIP traffic through kube-proxy", func() {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		webIP = svc.Spec.ClusterIP
		Expect(webIP).NotTo(BeEmpty())
		out := runProbe("pod-to-clusterip", "http", "http://"+webIP+"/")
		Expect(out).To(HavePrefix("web-"))
	})

	It("resolves Service names through CoreDNS", func() {
		out := runProbe("dns", "dns", "web."+ns+".svc.cluster.local")
		Expect(strings.Fields(out)).To(ContainElement(webIP))
		// The short name, through the pod's search path, end to end.
		out = runProbe("dns-http", "http", "http://web/")
		Expect(out).To(HavePrefix("web-"))
	})

	// The cluster's nodes, as cluster-up.sh made them (cluster.env) and as the
	// API server lists them.
	var nodes []corev1.Node
	It("has every node Ready, each with a pod CIDR of its own and a zone", func() {
		want := strings.Fields(cluster["NODE_NAMES"])
		Expect(want).NotTo(BeEmpty(), "cluster.env names no nodes: start the testbed with `make cluster-up`")
		Eventually(func(g Gomega) {
			list := &corev1.NodeList{}
			g.Expect(k8s.List(ctx, list)).To(Succeed())
			nodes = list.Items
			names := make([]string, 0, len(nodes))
			cidrs := map[string]string{}
			for _, n := range nodes {
				names = append(names, n.Name)
				g.Expect(nodeReady(&n)).To(BeTrue(), "node %s not Ready", n.Name)
				g.Expect(n.Labels).To(HaveKeyWithValue("topology.kubernetes.io/zone", Not(BeEmpty())), "node %s", n.Name)
				g.Expect(n.Spec.PodCIDR).NotTo(BeEmpty(), "node %s has no pod CIDR", n.Name)
				g.Expect(cidrs).NotTo(HaveKey(n.Spec.PodCIDR), "nodes %s and %s share a pod CIDR", cidrs[n.Spec.PodCIDR], n.Name)
				cidrs[n.Spec.PodCIDR] = n.Name
			}
			g.Expect(names).To(ConsistOf(want))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	})

	// Node i's server pod and a Service whose only endpoint it is.
	serverName := func(node string) string { return "srv-" + node }
	serverIPs := map[string]string{}
	serviceIPs := map[string]string{}
	It("runs a pod on every node", func() {
		for _, n := range nodes {
			spec := webPodSpec()
			spec.NodeSelector = onNode(n.Name)
			labels := map[string]string{"app": "per-node", "node": n.Name}
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: serverName(n.Name), Namespace: ns, Labels: labels}, Spec: spec}
			Expect(k8s.Create(ctx, p)).To(Succeed())
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: serverName(n.Name), Namespace: ns},
				Spec: corev1.ServiceSpec{
					Selector: labels,
					Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
				},
			}
			Expect(k8s.Create(ctx, svc)).To(Succeed())
			serviceIPs[n.Name] = svc.Spec.ClusterIP
		}
		for _, n := range nodes {
			Eventually(podReady(serverName(n.Name))).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
			p := &corev1.Pod{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: serverName(n.Name)}, p)).To(Succeed())
			Expect(p.Spec.NodeName).To(Equal(n.Name))
			Expect(p.Status.PodIP).NotTo(BeEmpty())
			serverIPs[n.Name] = p.Status.PodIP
		}
	})

	// Every node is a client of the next one (the last of the first): with
	// three nodes that crosses every pair of nodes in both directions, and on
	// one node it is the node talking to itself. All probes run at once.
	It("carries pod-to-pod, Service and DNS traffic from every node to the next", func() {
		Expect(nodes).NotTo(BeEmpty())
		type check struct {
			from, probe string
			args        []string
			expect      func(out string)
		}
		var checks []check
		for i, n := range nodes {
			to := nodes[(i+1)%len(nodes)].Name
			host := serverName(to)
			checks = append(checks,
				check{n.Name, "p2p-" + n.Name, []string{"http", "http://" + serverIPs[to] + ":8080/"},
					func(out string) { Expect(out).To(Equal(host), "pod on %s -> pod on %s", n.Name, to) }},
				// By its short name: CoreDNS through the pod's search path, then
				// the node's kube-proxy to the ClusterIP's only endpoint.
				check{n.Name, "svc-" + n.Name, []string{"http", "http://" + host + "/"},
					func(out string) { Expect(out).To(Equal(host), "pod on %s -> Service of %s", n.Name, to) }},
				check{n.Name, "dns-" + n.Name, []string{"dns", host + "." + ns + ".svc.cluster.local"},
					func(out string) {
						Expect(strings.Fields(out)).To(ContainElement(serviceIPs[to]), "DNS from %s", n.Name)
					}},
			)
		}
		var wg sync.WaitGroup
		for _, c := range checks {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				c.expect(runProbeOn(c.from, c.probe, c.args...))
			}()
		}
		wg.Wait()
	})

	It("runs memcached that answers set and get", func() {
		img := images["MEMCACHED_IMAGE"]
		Expect(img).NotTo(BeEmpty(), "images.env has no MEMCACHED_IMAGE")
		labels := map[string]string{"app": "memcached"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "memcached", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: "memcached", Image: img, ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"-p", "11211", "-U", "0", "-m", "64"},
						Ports:           []corev1.ContainerPort{{ContainerPort: 11211}},
						SecurityContext: restrictedContext(11211),
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(11211)}},
							PeriodSeconds: 1,
						},
					}},
				}},
			},
		}
		Expect(k8s.Create(ctx, d)).To(Succeed())
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "memcached", Namespace: ns},
			Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 11211}}},
		}
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(d), d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(BeNumerically("==", 1))
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		out := runProbe("memcached-client", "memcached", "memcached:11211")
		Expect(out).To(ContainSubstring("set/get ok"))
	})

	It("issues a self-signed Certificate with cert-manager", func() {
		issuer := &cmapi.Issuer{
			ObjectMeta: metav1.ObjectMeta{Name: "selfsigned", Namespace: ns},
			Spec:       cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}},
		}
		Expect(k8s.Create(ctx, issuer)).To(Succeed())
		cert := &cmapi.Certificate{
			ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns},
			Spec: cmapi.CertificateSpec{
				SecretName: "smoke-tls",
				CommonName: "smoke.example.test",
				DNSNames:   []string{"smoke.example.test"},
				IssuerRef:  cmmeta.IssuerReference{Name: "selfsigned", Kind: "Issuer"},
			},
		}
		Expect(k8s.Create(ctx, cert)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cert), cert)).To(Succeed())
			ready := false
			for _, c := range cert.Status.Conditions {
				if c.Type == cmapi.CertificateConditionReady && c.Status == cmmeta.ConditionTrue {
					ready = true
				}
			}
			g.Expect(ready).To(BeTrue(), "Certificate not Ready: %+v", cert.Status.Conditions)
		}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
		s := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "smoke-tls"}, s)).To(Succeed())
		Expect(s.Data).To(HaveKey("tls.crt"))
	})

	It("rejects an invalid Certificate through cert-manager's webhook", func() {
		bad := &cmapi.Certificate{
			ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns},
			Spec:       cmapi.CertificateSpec{SecretName: "bad-tls", IssuerRef: cmmeta.IssuerReference{Name: "selfsigned"}},
		}
		err := k8s.Create(ctx, bad)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("admission webhook"))
	})
})

// onNode is the node selector of a pod that must run on node (none when empty).
func onNode(node string) map[string]string {
	if node == "" {
		return nil
	}
	return map[string]string{corev1.LabelHostname: node}
}

// nodeReady reports whether the node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
