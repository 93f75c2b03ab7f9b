//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// authSecretManifest is the Secret a fleet's spec.auth names, holding one
// auth file entry.
func authSecretManifest(ns, name, user, pass string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: %s}
stringData:
  auth: "%s:%s\n"
`, name, ns, user, pass)
}

func authFleetManifest(ns, name, secret string, size int) string {
	return fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: %s, namespace: %s}
spec:
  size: %d
  auth:
    secretRef: {name: %s}
  monitoring:
    exporter: {enabled: true}
`, name, ns, size, secret)
}

// fleetPodList are the fleet's live pods, by name.
func fleetPodList(ctx context.Context, g Gomega, ns, name string) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	slices.SortFunc(live, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return live
}

// podIdentity is what a restart or a replacement of a pod would change.
func podIdentity(pods []corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		restarts := int32(0)
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		out[p.Name] = fmt.Sprintf("uid=%s restarts=%d", p.UID, restarts)
	}
	return out
}

func withDeadline(d time.Duration) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "PROBE_DEADLINE", Value: d.String()})
	}
}

var _ = Describe("memcached authentication (spec.auth)", Ordered, Label("auth"), func() {
	ctx := context.Background()
	const ns, name, secret = "e2e-auth", "authed", "authed-users"
	var pods []corev1.Pod

	BeforeAll(func() {
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(ns)))
		mustRun(helm(append([]string{"install", release, chart}, installArgs("--set", "test.namespace="+ns)...)...))
	})
	AfterEach(func() { dumpOnFailure(ns) })
	AfterAll(func() {
		mustRun(cli("kubectl", uidPlatformManifest, "delete", "-f", "-", "--ignore-not-found"))
		mustRun(kubectl("delete", "namespace", ns, uidNamespace, "--ignore-not-found", "--wait=false"))
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
	})

	It("refuses a client without credentials and serves one with them on every pod; the exporter logs in too", func() {
		mustRun(kubectlApply(authSecretManifest(ns, secret, "app", "first-pass")))
		mustRun(kubectlApply(authFleetManifest(ns, name, secret, 2)))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/"+name, "--timeout=3m"))
		Eventually(func(g Gomega) {
			pods = fleetPodList(ctx, g, ns, name)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Status.PodIP).NotTo(BeEmpty())
				g.Expect(p.Spec.Containers).To(ContainElement(HaveField("Name", "auth-reloader")))
			}
		}).WithTimeout(wait).Should(Succeed())
		Expect(mustRun(kubectl("get", "memcached", name, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="AuthReady")].status}`))).To(Equal("True"))
		Expect(mustRun(kubectl("get", "deployment", name, "-n", ns, "-o", "yaml"))).NotTo(ContainSubstring("first-pass"), "the password stays in the Secret")

		for _, p := range pods {
			addr := p.Status.PodIP + ":11211"
			Expect(probeArgs(ctx, ns, "anon", "memcached-answer", addr)).To(ContainSubstring("get answer: CLIENT_ERROR unauthenticated"), p.Name)
			Expect(probeArgs(ctx, ns, "authed", "memcached-auth", addr, "app", "first-pass")).To(ContainSubstring("set/get ok"), p.Name)
			Expect(probe(ctx, ns, "metrics", "http", "http://"+p.Status.PodIP+":9150/metrics")).To(ContainSubstring("\nmemcached_up 1\n"), p.Name)
		}
	})

	It("rotates the password when the Secret changes, without restarting or replacing a pod", func() {
		before := podIdentity(pods)
		updated := time.Now()
		mustRun(kubectlApply(authSecretManifest(ns, secret, "app", "second-pass")))

		// One client per pod, each trying the new password every second
		// until memcached takes it: the kubelet refreshes the volume within
		// its sync period, then the reloader signals memcached.
		var waiting []*corev1.Pod
		for _, p := range pods {
			waiting = append(waiting, startProbe(ctx, ns, "rotated", withDeadline(4*time.Minute), "memcached-auth", p.Status.PodIP+":11211", "app", "second-pass"))
		}
		var slowest time.Duration
		for i, w := range waiting {
			out := probeLog(ctx, w)
			at := out[strings.LastIndex(out, " at ")+len(" at "):]
			accepted, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(at))
			Expect(err).NotTo(HaveOccurred(), out)
			took := accepted.Sub(updated)
			GinkgoWriter.Printf("%s: new password accepted %s after the Secret update\n", pods[i].Name, took.Round(time.Millisecond))
			slowest = max(slowest, took)
		}
		AddReportEntry("Secret updated → new password accepted by every pod", slowest.Round(time.Millisecond).String())
		Expect(slowest).To(BeNumerically("<", 3*time.Minute))

		for _, p := range pods {
			Expect(probeArgs(ctx, ns, "old", "memcached-answer", p.Status.PodIP+":11211", "app", "first-pass")).To(
				ContainSubstring("login answer: CLIENT_ERROR authentication failure"), p.Name)
			Expect(mustRun(kubectl("logs", "-n", ns, p.Name, "-c", "auth-reloader"))).To(ContainSubstring("Signalled memcached to reload the auth file"))
		}
		var after map[string]string
		Eventually(func(g Gomega) { after = podIdentity(fleetPodList(ctx, g, ns, name)) }).Should(Succeed())
		Expect(after).To(Equal(before), "same pods, no restart: the caches stay warm")
		AddReportEntry("pods before and after the rotation", fmt.Sprintf("%v", after))
		// The exporter reads the file on every scrape: it follows the rotation.
		for _, p := range pods {
			Expect(probe(ctx, ns, "metrics", "http", "http://"+p.Status.PodIP+":9150/metrics")).To(ContainSubstring("\nmemcached_up 1\n"), p.Name)
		}
	})

	It("reports a missing Secret from the pod the kubelet holds back, with AuthReady False, then recovers when it is created", func() {
		const late = "late"
		mustRun(kubectlApply(authFleetManifest(ns, late, late+"-users", 1)))
		Eventually(func(g Gomega) {
			mc, err := getMemcached(ns, late)
			g.Expect(err).NotTo(HaveOccurred())
			var reasons []string
			for _, c := range mc.Status.Conditions {
				reasons = append(reasons, c.Type+"="+string(c.Status)+"/"+c.Reason)
			}
			g.Expect(reasons).To(ContainElements("AuthReady=False/AuthSecretMissing", "Ready=False/AuthSecretMissing"))
		}).WithTimeout(wait).WithPolling(time.Second).Should(Succeed())
		Expect(mustRun(kubectl("get", "memcached", late, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="AuthReady")].message}`))).To(
			ContainSubstring(`secret "` + late + `-users" not found`))
		Expect(mustRun(kubectl("get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance="+late, "-o",
			`jsonpath={.items[*].status.initContainerStatuses[?(@.name=="auth-check")].state.waiting.reason}`))).To(ContainSubstring("CreateContainerConfigError"),
			"the kubelet holds the pod back at its auth check, which the operator reads")

		created := time.Now()
		mustRun(kubectlApply(authSecretManifest(ns, late+"-users", "late", "pass")))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/"+late, "--timeout=3m"))
		AddReportEntry("missing Secret created → fleet Ready", time.Since(created).Round(time.Second).String())
		Expect(probeArgs(ctx, ns, "late", "memcached-auth", late+"."+ns+".svc:11211", "late", "pass")).To(ContainSubstring("set/get ok"))
	})

	It("runs where the platform assigns UIDs: a fleet that names none gets the namespace's, is admitted restricted and serves", func() {
		// Last in this suite: the value changes every fleet's pods, and a
		// pod nothing assigns a UID to runs each container as its image's
		// user, so the reloader could no longer signal memcached here.
		mustRun(helm("upgrade", release, chart, "-n", operatorNamespace, "--reuse-values", "--wait", "--timeout", "5m",
			"--set", "operator.platformAssignsUIDs=true"))
		mustRun(kubectlApply(uidPlatformManifest))
		pod := func(uid string) string {
			return `apiVersion: v1
kind: Pod
metadata: {name: uid-check, namespace: ` + uidNamespace + `}
spec:
  securityContext: {runAsNonRoot: true, ` + uid + `seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: c
    image: ` + images["MEMCACHED_IMAGE"] + `
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`
		}
		// Both policies in force (they take effect a moment after creation):
		// the fixed UID a fleet has without the value is refused, and a pod
		// that names none is given the range's first.
		Eventually(func(g Gomega) {
			out, err := kubectlApply(pod("runAsUser: 11211, "), "--dry-run=server")
			g.Expect(err).To(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("1000680000/10000"))
			out, err = kubectlApply(pod(""), "--dry-run=server", "-o", "jsonpath={.spec.securityContext.runAsUser}")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out).To(Equal("1000680000"))
		}).WithTimeout(wait).WithPolling(time.Second).Should(Succeed())

		mustRun(kubectlApply(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: assigned, namespace: ` + uidNamespace + `}
spec: {size: 2}
`))
		fleetReadyIn(uidNamespace, "assigned", 2)
		for _, p := range fleetPodList(ctx, Default, uidNamespace, "assigned") {
			Expect(p.Spec.SecurityContext.RunAsUser).To(HaveValue(Equal(int64(1000680000))), p.Name)
			Expect(p.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()), p.Name)
		}
		Expect(probe(ctx, ns, "uid-client", "memcached", "assigned."+uidNamespace+".svc:11211")).To(ContainSubstring("set/get ok"))
	})
})

// uidNamespace stands in for an OpenShift project: a UID range in the
// annotation restricted-v2 reads, a MutatingAdmissionPolicy that assigns
// the range's first UID to a pod that names none (as the SCC admission
// does), and a ValidatingAdmissionPolicy that refuses a pod running as any
// UID outside the range.
const uidNamespace = "e2e-uid"

var uidPlatformManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: ` + uidNamespace + `
  labels:
    e2e-uid-range: "true"
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
  annotations:
    openshift.io/sa.scc.uid-range: 1000680000/10000
` + podPolicyHead("MutatingAdmissionPolicy", `["CREATE"]`) + `
  reinvocationPolicy: Never
  matchConditions:
  - name: names-no-uid
    expression: "!has(object.spec.securityContext) || !has(object.spec.securityContext.runAsUser)"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >-
        Object{spec: Object.spec{securityContext: Object.spec.securityContext{
          runAsUser: int(namespaceObject.metadata.annotations['openshift.io/sa.scc.uid-range'].split('/')[0]),
          fsGroup: int(namespaceObject.metadata.annotations['openshift.io/sa.scc.uid-range'].split('/')[0])}}}
` + podPolicyBinding("MutatingAdmissionPolicy", "") + podPolicyHead("ValidatingAdmissionPolicy", `["CREATE", "UPDATE"]`) + `
  variables:
  - name: range
    expression: "namespaceObject.metadata.annotations['openshift.io/sa.scc.uid-range'].split('/')"
  - name: pod
    expression: "object.spec.?securityContext.?runAsUser.orValue(-1)"
  - name: uids
    expression: "[variables.pod] + (object.spec.containers + object.spec.?initContainers.orValue([])).map(c, c.?securityContext.?runAsUser.orValue(variables.pod))"
  validations:
  - expression: "variables.uids.all(u, u >= int(variables.range[0]) && u < int(variables.range[0]) + int(variables.range[1]))"
    messageExpression: "'pods here run as a UID of ' + variables.range[0] + '/' + variables.range[1] + ', assigned when the pod names none'"
` + podPolicyBinding("ValidatingAdmissionPolicy", "\n  validationActions: [Deny]")

// podPolicyHead starts an admission policy named e2e-scc-uid over pods.
func podPolicyHead(kind, operations string) string {
	return `---
apiVersion: admissionregistration.k8s.io/v1
kind: ` + kind + `
metadata: {name: e2e-scc-uid}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ` + operations + `, resources: ["pods"]}`
}

// podPolicyBinding binds the e2e-scc-uid policy of kind to the namespaces
// with a UID range.
func podPolicyBinding(kind, extra string) string {
	return `
---
apiVersion: admissionregistration.k8s.io/v1
kind: ` + kind + `Binding
metadata: {name: e2e-scc-uid}
spec:
  policyName: e2e-scc-uid` + extra + `
  matchResources:
    namespaceSelector: {matchLabels: {e2e-uid-range: "true"}}
`
}
