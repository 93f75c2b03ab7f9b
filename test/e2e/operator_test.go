//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/webhookcert"
)

const (
	release           = "memcached-operator"
	operatorNamespace = "memcached-operator-system"
	appNamespace      = "e2e-apps"
	ignoredNamespace  = "e2e-ignored"
	chart             = "charts/memcached-operator"
	operatorSelector  = "app.kubernetes.io/name=memcached-operator,app.kubernetes.io/instance=memcached-operator,app.kubernetes.io/component=operator"
	wait              = 3 * time.Minute
)

// memcachedView is the part of a Memcached the suite reads from its JSON.
type memcachedView struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     map[string]any    `json:"spec"`
	Status   struct {
		Nodes         []string           `json:"nodes"`
		Servers       []string           `json:"servers"`
		ReadyReplicas int32              `json:"readyReplicas"`
		Conditions    []metav1.Condition `json:"conditions"`
	} `json:"status"`
}

// getMemcached reads a fleet through the API client rather than kubectl:
// most specs poll it every second, and a kubectl process a poll took the
// CPU of the cluster under test.
func getMemcached(ns, name string) (*memcachedView, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"})
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	v := &memcachedView{}
	return v, json.Unmarshal(raw, v)
}

// podNames are the running, not terminating, pods of a fleet, sorted.
func podNames(ctx context.Context, g Gomega, ns, instance string) []string {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": instance})).To(Succeed())
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// sampleConverged waits until the tutorial's fleet has size ready pods whose
// names status.nodes lists.
func sampleConverged(ctx context.Context, size int) {
	ns, name := appNamespace, "memcached-sample"
	GinkgoHelper()
	Eventually(func(g Gomega) {
		mc, err := getMemcached(ns, name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mc.Status.ReadyReplicas).To(BeNumerically("==", size))
		names := podNames(ctx, g, ns, name)
		g.Expect(names).To(HaveLen(size))
		g.Expect(mc.Status.Nodes).To(Equal(names))
	}).WithTimeout(wait).WithPolling(time.Second).Should(Succeed())
}

func operatorPods(ctx context.Context, g Gomega) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace), client.MatchingLabels{
		"app.kubernetes.io/name": "memcached-operator", "app.kubernetes.io/instance": release, "app.kubernetes.io/component": "operator",
	})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	g.Expect(live).NotTo(BeEmpty())
	return live
}

// operatorLeader is the operator pod that holds the leader-election Lease,
// the one that reconciles; the others only serve the webhooks.
func operatorLeader(ctx context.Context, g Gomega) corev1.Pod {
	lease := &coordinationv1.Lease{}
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: "memcached-operator.cache.example.com"}, lease)).To(Succeed())
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	pods := operatorPods(ctx, g)
	// controller-runtime's identity is the pod's hostname, "_", a UUID.
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return strings.HasPrefix(holder, p.Name+"_") })
	g.Expect(i).NotTo(Equal(-1), "the Lease's holder %q is none of the operator's live pods", holder)
	return pods[i]
}

func podUIDs(pods []corev1.Pod) []types.UID {
	var uids []types.UID
	for _, p := range pods {
		uids = append(uids, p.UID)
	}
	return uids
}

// operatorRolledOut waits until the operator's Deployment has its pod ready,
// that is serving webhooks.
func operatorRolledOut() {
	GinkgoHelper()
	mustRun(kubectl("rollout", "status", "deployment", "-n", operatorNamespace, "-l", operatorSelector, "--timeout=3m"))
}

func namespaceManifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
`, name)
}

// installArgs are the values every install of the suite uses: the testbed's
// memcached image, a small --max-size to test against, and a helm test that
// runs a real fleet.
func installArgs(extra ...string) []string {
	return append([]string{
		"--namespace", operatorNamespace, "--wait", "--timeout", "5m",
		"--set", "operator.defaultImage=" + images["MEMCACHED_IMAGE"],
		"--set", "operator.maxSize=10",
		"--set", "test.memcached=true",
		"--set", "test.namespace=" + appNamespace,
	}, extra...)
}

var _ = Describe("memcached-operator installed with Helm", Ordered, Label("operator"), func() {
	ctx := context.Background()
	var firstApplyErr error
	var installTook time.Duration

	BeforeAll(func() {
		Expect(images["MEMCACHED_IMAGE"]).NotTo(BeEmpty(), "images.env has no MEMCACHED_IMAGE")
		// Start from a clean slate on a cluster an earlier run left up (KEEP_CLUSTER=1).
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", operatorNamespace, appNamespace, ignoredNamespace, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(appNamespace)))
		start := time.Now()
		mustRun(helm(append([]string{"install", release, chart}, installArgs()...)...))
		installTook = time.Since(start)
		// The very first admission after --wait returns: no "connection refused" window.
		_, firstApplyErr = kubectlApply(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: first, namespace: `+appNamespace+`}
spec: {size: 1}`, "--dry-run=server")
		AddReportEntry("helm install --wait", installTook.String())
	})
	AfterEach(func() { dumpOnFailure(appNamespace) })

	It("installs: operator Ready, webhook Certificate Ready, CA injected, admitting right after --wait", func() {
		Expect(firstApplyErr).NotTo(HaveOccurred())
		certs := &cmapi.CertificateList{}
		Expect(k8s.List(ctx, certs, client.InNamespace(operatorNamespace))).To(Succeed())
		Expect(certs.Items).NotTo(BeEmpty())
		for _, c := range certs.Items {
			Expect(c.Status.Conditions).To(ContainElement(And(
				HaveField("Type", cmapi.CertificateConditionReady), HaveField("Status", cmmeta.ConditionTrue))), c.Name)
		}
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, types.NamespacedName{Name: release}, mwc)).To(Succeed())
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, types.NamespacedName{Name: release}, vwc)).To(Succeed())
		for _, w := range mwc.Webhooks {
			Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), w.Name)
		}
		for _, w := range vwc.Webhooks {
			Expect(w.ClientConfig.CABundle).NotTo(BeEmpty(), w.Name)
		}
		// The update after cainjector's, which readiness waited for.
		Expect(mwc.Annotations).To(HaveKeyWithValue(webhookcert.BundleSeenAnnotation, webhookcert.BundleDigest(mwc)))
		Expect(vwc.Annotations).To(HaveKeyWithValue(webhookcert.BundleSeenAnnotation, webhookcert.BundleDigest(vwc)))
	})

	It("runs the tutorial: sample of 3 Available, set/get through the Service, patch to 5, scale to 4", func() {
		start := time.Now()
		mustRun(kubectl("apply", "-n", appNamespace, "-f", "docs/samples/cache_v1alpha1_memcached.yaml"))
		mustRun(kubectl("wait", "-n", appNamespace, "--for=condition=Available", "memcached/memcached-sample", "--timeout=3m"))
		AddReportEntry("kubectl apply of the sample to Available (3 pods)", time.Since(start).String())
		sampleConverged(ctx, 3)
		out := mustRun(kubectl("get", "deployment", "memcached-sample", "-n", appNamespace, "-o", "jsonpath={.status.readyReplicas}"))
		Expect(out).To(Equal("3"))

		Expect(probe(ctx, appNamespace, "memcached-client", "memcached", "memcached-sample."+appNamespace+".svc:11211")).To(ContainSubstring("set/get ok"))
		Expect(mustRun(kubectl("get", "memcacheds.v1beta1.cache.example.com", "memcached-sample", "-n", appNamespace, "-o", "jsonpath={.apiVersion} {.spec.size}"))).
			To(Equal("cache.example.com/v1beta1 3"), "the fleet read through the beta API")

		mustRun(kubectl("patch", "memcached", "memcached-sample", "-n", appNamespace, "-p", `{"spec":{"size": 5}}`, "--type=merge"))
		sampleConverged(ctx, 5)

		mustRun(kubectl("scale", "memcached/memcached-sample", "-n", appNamespace, "--replicas=4"))
		sampleConverged(ctx, 4)
		mustRun(kubectl("wait", "-n", appNamespace, "--for=condition=Available", "memcached/memcached-sample", "--timeout=2m"))
		Expect(mustRun(kubectl("get", "mc", "-n", appNamespace))).To(MatchRegexp(`memcached-sample\s+4\s+4\s+True`))
	})

	It("says Ready only once every pod runs a template-only change; the Service name resolves to every ready pod", func() {
		ns, name := appNamespace, "memcached-sample"
		mustRun(kubectl("patch", "memcached", name, "-n", ns, "--type=merge", "-p", `{"spec":{"maxConnections":2048}}`))
		start := time.Now()
		// kubectl wait reads the condition's observedGeneration: it cannot be
		// satisfied by the status of the generation before the patch.
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/"+name, "--timeout=4m"))
		AddReportEntry("template-only patch to Ready (4 pods rolled one at a time)", time.Since(start).String())

		By("when kubectl wait returns, the rollout has really happened")
		dep := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, dep)).To(Succeed())
		Expect(dep.Status.ObservedGeneration).To(Equal(dep.Generation))
		Expect(dep.Status).To(And(HaveField("UpdatedReplicas", int32(4)), HaveField("Replicas", int32(4)), HaveField("AvailableReplicas", int32(4))))
		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name})).To(Succeed())
		var ips []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			Expect(p.Spec.Containers[0].Args).To(ContainElement("2048"), "pod %s runs the new spec", p.Name)
			ips = append(ips, p.Status.PodIP)
		}
		Expect(ips).To(HaveLen(4))
		mc, err := getMemcached(ns, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(mc.Status.Nodes).To(HaveLen(4))

		By("<name>.<namespace>.svc resolves to the address of every ready pod, which is how clients find the servers")
		Eventually(func() []string {
			return strings.Fields(probe(ctx, ns, "dns-client", "dns", name+"."+ns+".svc.cluster.local"))
		}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(ConsistOf(ips))

		By("_memcached._tcp.<name>.<namespace>.svc gives each of them with the port (SRV)")
		records := strings.Fields(probe(ctx, ns, "srv-client", "srv", name+"."+ns+".svc.cluster.local"))
		Expect(records).To(HaveLen(4))
		Expect(records).To(HaveEach(MatchRegexp(`\.%s\.%s\.svc\.cluster\.local\.:11211$`, name, ns)))
	})

	It("stores a Memcached that gave only size with every default filled in", func() {
		mustRun(kubectlApply(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: defaulted, namespace: ` + appNamespace + `}
spec: {size: 1}`))
		mc, err := getMemcached(appNamespace, "defaulted")
		Expect(err).NotTo(HaveOccurred())
		Expect(mc.Spec).To(And(
			HaveKeyWithValue("image", images["MEMCACHED_IMAGE"]),
			HaveKeyWithValue("port", BeNumerically("==", 11211)),
			HaveKeyWithValue("maxConnections", BeNumerically("==", 1024)),
			HaveKeyWithValue("maxItemSize", "1m"),
			HaveKeyWithValue("imagePullPolicy", "IfNotPresent"),
		))
		By("-m and -t are not stored: they follow the container's limits, and status.effective shows them")
		Expect(mc.Spec).NotTo(HaveKey("memoryLimitMB"))
		Expect(mc.Spec).NotTo(HaveKey("threads"))
		Eventually(func(g Gomega) {
			out, err := kubectl("get", "memcached", "defaulted", "-n", appNamespace, "-o", "jsonpath={.status.effective.memoryLimitMB} {.status.effective.threads}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(Equal("64 4"))
		}).Should(Succeed())
		mustRun(kubectl("delete", "memcached", "defaulted", "-n", appNamespace, "--wait=false"))
	})

	// The ServiceMonitor and a real Prometheus: monitoring_test.go; the
	// ServiceMonitor API missing: the controller's envtest suite.
	It("runs the exporter sidecar when monitoring is on: memcached_up 1 on every pod, a set counted", func() {
		ns, name := appNamespace, "monitored"
		mustRun(kubectlApply(monitoredFleet(ns, name, "")))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/"+name, "--timeout=3m"))
		Expect(probe(ctx, ns, "set", "memcached", name+"."+ns+".svc:11211")).To(ContainSubstring("set/get ok"))

		pods := &corev1.PodList{}
		Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name})).To(Succeed())
		sets := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			start := time.Now()
			metrics := probe(ctx, ns, "scrape", "http", "http://"+p.Status.PodIP+":9150/metrics")
			AddReportEntry("exporter scrape through a probe pod (pod start included)", time.Since(start).String())
			Expect(metrics).To(ContainSubstring("\nmemcached_up 1\n"), p.Name)
			Expect(metrics).To(ContainSubstring(`memcached_version{version="1.6`), p.Name)
			if strings.Contains(metrics, `memcached_commands_total{command="set",status="hit"} 1`) {
				sets++
			}
		}
		Expect(sets).To(Equal(1), "the probe's set landed on one server, and its exporter counted it")
		mustRun(kubectl("delete", "memcached", name, "-n", ns, "--wait=false"))
	})

	DescribeTable("rejects bad input with its field path and stores nothing",
		func(manifest, message string) {
			out, err := kubectlApply(manifest)
			Expect(err).To(HaveOccurred())
			Expect(out).To(ContainSubstring(message))
			_, getErr := kubectl("get", "memcached", "rejected", "-n", appNamespace)
			Expect(getErr).To(HaveOccurred(), "a rejected Memcached was stored")
		},
		Entry("size below 0", mcManifest("size: -1"), "spec.size"),
		Entry("size above --max-size", mcManifest("size: 11"), "spec.size: Invalid value: 11: must be less than or equal to 10, the operator's --max-size"),
		Entry("memory above the container limit", mcManifest("size: 1\n  memoryLimitMB: 512\n  resources: {limits: {memory: 128Mi}}"), "spec.memoryLimitMB"),
		Entry("an extra arg a field owns", mcManifest("size: 1\n  extraArgs: [\"-p\", \"1\"]"), "spec.extraArgs[0]"),
		Entry("an owned option with its value attached", mcManifest("size: 1\n  extraArgs: [\"-C\", \"-m2048\"]"), "spec.extraArgs[1]"),
		Entry("-d clustered behind -v", mcManifest("size: 1\n  extraArgs: [\"-vd\"]"), "daemonizes"),
		Entry("a PDB bound that is no number", mcManifest("size: 3\n  podDisruptionBudget: {minAvailable: lots}"), "spec.podDisruptionBudget.minAvailable"),
		Entry("a name that cannot name the fleet's Service", strings.Replace(mcManifest("size: 1"), "name: rejected", "name: cache.v2", 1), "DNS-1035 label"),
	)

	It("rejects kubectl scale above --max-size and a change of the immutable port", func() {
		out, err := kubectl("scale", "memcached/memcached-sample", "-n", appNamespace, "--replicas=11")
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("spec.replicas: Invalid value: 11"))
		out, err = kubectl("patch", "memcached", "memcached-sample", "-n", appNamespace, "-p", `{"spec":{"port":11212}}`, "--type=merge")
		Expect(err).To(HaveOccurred())
		Expect(out).To(And(ContainSubstring("spec.port"), ContainSubstring("immutable")))
		mc, err := getMemcached(appNamespace, "memcached-sample")
		Expect(err).NotTo(HaveOccurred())
		Expect(mc.Spec).To(And(HaveKeyWithValue("size", BeNumerically("==", 4)), HaveKeyWithValue("port", BeNumerically("==", 11211))))
	})

	It("repairs drift: a deleted Deployment, edited replicas, a deleted pod", func() {
		dep := &appsv1.Deployment{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: appNamespace, Name: "memcached-sample"}, dep)).To(Succeed())
		mustRun(kubectl("delete", "deployment", "memcached-sample", "-n", appNamespace))
		Eventually(func(g Gomega) types.UID {
			d := &appsv1.Deployment{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(dep), d)).To(Succeed())
			return d.UID
		}).WithTimeout(wait).ShouldNot(Equal(dep.UID))
		sampleConverged(ctx, 4)

		mustRun(kubectl("scale", "deployment/memcached-sample", "-n", appNamespace, "--replicas=7"))
		Eventually(func() string {
			out, _ := kubectl("get", "deployment", "memcached-sample", "-n", appNamespace, "-o", "jsonpath={.spec.replicas}")
			return out
		}).WithTimeout(wait).WithPolling(time.Second).Should(Equal("4"))
		sampleConverged(ctx, 4)

		victim := podNames(ctx, Default, appNamespace, "memcached-sample")[0]
		mustRun(kubectl("delete", "pod", victim, "-n", appNamespace, "--wait=false"))
		Eventually(func(g Gomega) {
			mc, err := getMemcached(appNamespace, "memcached-sample")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mc.Status.Nodes).NotTo(ContainElement(victim))
		}).WithTimeout(wait).WithPolling(time.Second).Should(Succeed())
		sampleConverged(ctx, 4)
	})

	It("leaves a paused fleet's Deployment alone, and resumes it without a rollout", func() {
		const paused = "memcached.cache.example.com/paused"
		hashes := func(g Gomega) []string {
			var out []string
			for _, p := range fleetPodList(ctx, g, appNamespace, "memcached-sample") {
				out = append(out, p.Labels["pod-template-hash"])
			}
			return slices.Compact(slices.Sorted(slices.Values(out)))
		}
		before := hashes(Default)
		Expect(before).To(HaveLen(1))
		mustRun(kubectl("annotate", "memcached", "memcached-sample", "-n", appNamespace, paused+"=true"))
		Eventually(func() string {
			out, _ := kubectl("get", "memcached", "memcached-sample", "-n", appNamespace, "-o", `jsonpath={.status.conditions[?(@.type=="Paused")].status}`)
			return out
		}).WithTimeout(wait).WithPolling(time.Second).Should(Equal("True"))

		mustRun(kubectl("scale", "deployment/memcached-sample", "-n", appNamespace, "--replicas=5"))
		replicas := func() string {
			out, _ := kubectl("get", "deployment", "memcached-sample", "-n", appNamespace, "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}")
			return out
		}
		Eventually(replicas).WithTimeout(wait).WithPolling(time.Second).Should(Equal("5/5"), "the edit is left to run")
		Consistently(replicas).WithTimeout(3 * time.Second).WithPolling(time.Second).Should(Equal("5/5"))

		mustRun(kubectl("annotate", "memcached", "memcached-sample", "-n", appNamespace, paused+"-"))
		sampleConverged(ctx, 4)
		Expect(hashes(Default)).To(Equal(before), "every pod from the template it ran before the pause")
	})

	It("passes helm test, and fails it when the webhook is down", func() {
		mustRun(helm("test", release, "-n", operatorNamespace, "--logs", "--timeout", "5m"))

		mustRun(kubectl("scale", "deployment", "-n", operatorNamespace, "-l", operatorSelector, "--replicas=0"))
		Eventually(func(g Gomega) []string {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"app.kubernetes.io/component": "operator"})).To(Succeed())
			var names []string
			for _, p := range pods.Items {
				names = append(names, p.Name)
			}
			return names
		}).WithTimeout(wait).Should(BeEmpty())
		out, err := helm("test", release, "-n", operatorNamespace, "--logs", "--timeout", "2m")
		Expect(err).To(HaveOccurred(), "helm test must fail while the webhook is down:\n%s", out)

		mustRun(kubectl("scale", "deployment", "-n", operatorNamespace, "-l", operatorSelector, "--replicas=2"))
		operatorRolledOut()
		mustRun(helm("test", release, "-n", operatorNamespace, "--logs", "--timeout", "5m"))
	})

	It("rolls the operator on helm upgrade with new values and keeps the fleets serving", func() {
		before := podUIDs(operatorPods(ctx, Default))
		Expect(before).To(HaveLen(2), "the chart's default is two replicas")
		fleet := podNames(ctx, Default, appNamespace, "memcached-sample")
		mustRun(helm(append([]string{"upgrade", release, chart}, installArgs("--set", "operator.maxSize=20", "--set", "operator.logLevel=debug")...)...))
		Eventually(func(g Gomega) {
			now := podUIDs(operatorPods(ctx, g))
			g.Expect(now).To(HaveLen(2))
			g.Expect(now).NotTo(ContainElements(before[0]))
			g.Expect(now).NotTo(ContainElements(before[1]))
		}).WithTimeout(wait).Should(Succeed(), "both replicas rolled")
		Expect(podNames(ctx, Default, appNamespace, "memcached-sample")).To(Equal(fleet), "an operator upgrade must not restart memcached pods")
		Eventually(func() error {
			_, err := kubectl("scale", "memcached/memcached-sample", "-n", appNamespace, "--replicas=12", "--dry-run=server")
			return err
		}).WithTimeout(wait).WithPolling(2*time.Second).Should(Succeed(), "the new --max-size is in force")
	})

	It("restarts in the middle of a scale-up and converges with no duplicate objects", func() {
		mustRun(kubectl("patch", "memcached", "memcached-sample", "-n", appNamespace, "-p", `{"spec":{"size": 8}}`, "--type=merge"))
		// The leader is the replica that was reconciling; right after an
		// upgrade the Lease may still name a replica that is gone.
		var pod corev1.Pod
		Eventually(func(g Gomega) { pod = operatorLeader(ctx, g) }).WithTimeout(wait).Should(Succeed())
		mustRun(kubectl("delete", "pod", pod.Name, "-n", operatorNamespace, "--wait=false"))
		sampleConverged(ctx, 8)
		operatorRolledOut()
		sel := client.MatchingLabels{"app.kubernetes.io/instance": "memcached-sample", "app.kubernetes.io/managed-by": "memcached-operator"}
		deps, svcs, pdbs := &appsv1.DeploymentList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{}
		for _, l := range []client.ObjectList{deps, svcs, pdbs} {
			Expect(k8s.List(ctx, l, client.InNamespace(appNamespace), sel)).To(Succeed())
		}
		Expect(deps.Items).To(HaveLen(1))
		Expect(svcs.Items).To(HaveLen(1))
		Expect(pdbs.Items).To(HaveLen(1))
	})

	It("keeps admitting through a serving-certificate renewal, without restarting the operator", func() {
		operatorRolledOut()
		pods := operatorPods(ctx, Default)
		secretName := release + "-webhook-tls"
		old := &corev1.Secret{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: secretName}, old)).To(Succeed())
		// The watcher of each replica logs this line once at start-up and once per reload.
		reloads := func() []int {
			var n []int
			for _, p := range pods {
				out, _ := kubectl("logs", "-n", operatorNamespace, p.Name)
				n = append(n, strings.Count(out, "Updated current TLS certificate"))
			}
			return n
		}
		Eventually(reloads).Should(HaveEach(BeNumerically(">=", 1)), "the start-up load is logged")
		loaded := reloads()
		mustRun(kubectl("delete", "secret", secretName, "-n", operatorNamespace))
		Eventually(func(g Gomega) []byte {
			s := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(old), s)).To(Succeed())
			return s.Data["tls.crt"]
		}).WithTimeout(wait).ShouldNot(Or(BeEmpty(), Equal(old.Data["tls.crt"])))
		// The kubelet refreshes the mounted Secret within its sync period; the
		// operator's certificate watcher then loads it, in every replica.
		Eventually(func(g Gomega) {
			now := reloads()
			for i := range pods {
				g.Expect(now[i]).To(BeNumerically(">", loaded[i]), pods[i].Name)
			}
		}).WithTimeout(4 * time.Minute).WithPolling(5 * time.Second).Should(Succeed())
		for range 5 {
			mustRun(kubectl("scale", "memcached/memcached-sample", "-n", appNamespace, "--replicas=8", "--dry-run=server"))
		}
		now := operatorPods(ctx, Default)
		Expect(podUIDs(now)).To(ConsistOf(podUIDs(pods)))
		for i := range now {
			j := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.UID == now[i].UID })
			Expect(now[i].Status.ContainerStatuses[0].RestartCount).To(Equal(pods[j].Status.ContainerStatuses[0].RestartCount), now[i].Name)
		}
	})

	It("confines a fleet with spec.appArmorProfile where its node runs AppArmor; elsewhere the kubelet refuses its pods, which is why it is off by default", func() {
		mustRun(kubectlApply(strings.Replace(mcManifest("size: 1\n  appArmorProfile: RuntimeDefault"), "name: rejected", "name: confined", 1)))
		DeferCleanup(func() { _, _ = kubectl("delete", "memcached", "confined", "-n", appNamespace, "--wait=false") })
		// The testbed's nodes share this machine's kernel.
		enabled, _ := os.ReadFile("/sys/module/apparmor/parameters/enabled")
		if strings.TrimSpace(string(enabled)) == "Y" {
			mustRun(kubectl("wait", "-n", appNamespace, "--for=condition=Ready", "memcached/confined", "--timeout=3m"))
			return
		}
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(appNamespace), client.MatchingLabels{"app.kubernetes.io/instance": "confined"})).To(Succeed())
			g.Expect(pods.Items).To(ContainElement(And(
				HaveField("Status.Phase", corev1.PodFailed), HaveField("Status.Reason", "AppArmor"),
				HaveField("Status.Message", ContainSubstring("AppArmor is not enabled on the host")))))
		}).WithTimeout(wait).Should(Succeed())
		AddReportEntry("appArmorProfile on a node without AppArmor", "the kubelet refused the pod: AppArmor is not enabled on the host")
	})

	It("enforces the restricted Pod Security Standard where operator and fleets run", func() {
		for _, ns := range []string{operatorNamespace, appNamespace} {
			n := &corev1.Namespace{}
			Expect(k8s.Get(ctx, types.NamespacedName{Name: ns}, n)).To(Succeed())
			Expect(n.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
		}
		out, err := kubectl("run", "privileged", "-n", appNamespace, "--image="+images["MEMCACHED_IMAGE"], "--restart=Never",
			`--overrides={"spec":{"containers":[{"name":"privileged","image":"`+images["MEMCACHED_IMAGE"]+`","securityContext":{"privileged":true}}]}}`)
		Expect(err).To(HaveOccurred(), "a privileged pod was admitted:\n%s", out)
		Expect(out).To(ContainSubstring("violates PodSecurity"))
	})

	It("uninstalls leaving the CRD and the fleets, and a reinstall adopts them", func() {
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--wait"))
		mustRun(kubectl("get", "crd", "memcacheds.cache.example.com"))
		sampleConverged(ctx, 8)

		mustRun(helm(append([]string{"install", release, chart}, installArgs("--set", "operator.maxSize=20")...)...))
		mustRun(kubectl("patch", "memcached", "memcached-sample", "-n", appNamespace, "-p", `{"spec":{"size": 3}}`, "--type=merge"))
		sampleConverged(ctx, 3)
	})

	It("in namespace-scoped mode, reconciles only its namespaces with Role-only RBAC", func() {
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--wait"))
		const ignored = ignoredNamespace
		mustRun(kubectlApply(namespaceManifest(ignored)))
		mustRun(helm(append([]string{"install", release, chart}, installArgs("--set", "watchNamespaces={"+appNamespace+"}")...)...))

		// TokenReview and SubjectAccessReview, which guard the metrics endpoint,
		// are cluster-scoped APIs, and so are the two webhook configurations
		// readiness reads: those bindings are the only ones a namespaced
		// install may keep, and the second touches nothing but those two.
		out := mustRun(kubectl("get", "clusterrolebinding", "-l", "app.kubernetes.io/instance="+release, "-o", "name"))
		Expect(strings.Fields(out)).To(ConsistOf("clusterrolebinding.rbac.authorization.k8s.io/memcached-operator-metrics-auth",
			"clusterrolebinding.rbac.authorization.k8s.io/memcached-operator-webhook-certs"),
			"namespace-scoped mode binds no ClusterRole over Memcacheds or their objects")
		certsRole := &rbacv1.ClusterRole{}
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "memcached-operator-webhook-certs"}, certsRole)).To(Succeed())
		for _, rule := range certsRole.Rules {
			Expect(rule.APIGroups).To(ConsistOf("admissionregistration.k8s.io"))
			Expect(rule.ResourceNames).To(ConsistOf(release), "only the release's own webhook configurations")
			Expect(rule.Verbs).To(ConsistOf("get", "patch"), "with cert-manager, readiness reads them and marks their caBundle seen")
		}
		mustRun(kubectl("get", "rolebinding", "-n", appNamespace, "-l", "app.kubernetes.io/instance="+release, "-o", "name"))

		mustRun(kubectl("apply", "-n", ignored, "-f", "docs/samples/cache_v1alpha1_memcached.yaml"))
		mustRun(kubectl("patch", "memcached", "memcached-sample", "-n", appNamespace, "-p", `{"spec":{"size": 2}}`, "--type=merge"))
		sampleConverged(ctx, 2)
		Consistently(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ignored, Name: "memcached-sample"}, &appsv1.Deployment{}))
		}).WithTimeout(10 * time.Second).Should(BeTrue())
		mc, err := getMemcached(ignored, "memcached-sample")
		Expect(err).NotTo(HaveOccurred())
		Expect(mc.Status.Conditions).To(BeEmpty(), "a Memcached outside the watched namespaces is left alone")
	})
})

func mcManifest(spec string) string {
	return `apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: rejected, namespace: ` + appNamespace + `}
spec:
  ` + spec + "\n"
}

// monitoredFleet is a Memcached of 2 pods with the exporter on; more is YAML
// added under spec.monitoring (a serviceMonitor line, say).
func monitoredFleet(ns, name, more string) string {
	return `apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  size: 2
  monitoring:
    exporter: {enabled: true}
` + more
}
