//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// tlsIssuerManifest is a self-signed root, a CA Certificate it signs, and a
// CA Issuer from that CA's Secret: the fleet's certificate then carries a CA
// (ca.crt) that clients verify against, and renewals keep it.
func tlsIssuerManifest(ns string) string {
	return fmt.Sprintf(`apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: %[1]s}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: e2e-ca, namespace: %[1]s}
spec:
  isCA: true
  commonName: e2e-ca
  secretName: e2e-ca
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: selfsigned, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: e2e-ca, namespace: %[1]s}
spec: {ca: {secretName: e2e-ca}}
`, ns)
}

func tlsFleetManifest(ns, name string, size int) string {
	return fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: %s, namespace: %s}
spec:
  size: %d
  tls:
    enabled: true
    issuerRef: {name: e2e-ca}
    plaintextPort: 11311
  monitoring:
    exporter: {enabled: true}
`, name, ns, size)
}

// tlsSecret is the certificate Secret of the suite's fleet.
const tlsSecret = "secure-tls"

// withCA mounts the fleet's certificate Secret in the probe, for its ca.crt.
func withCA(deadline time.Duration) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: tlsSecret, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}})
		s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "ca", MountPath: "/ca", ReadOnly: true})
		if deadline > 0 {
			s.Containers[0].Env = append(s.Containers[0].Env, corev1.EnvVar{Name: "PROBE_DEADLINE", Value: deadline.String()})
		}
	}
}

var servedSerial = regexp.MustCompile(`serial=([0-9a-f]+)`)

var _ = Describe("TLS from cert-manager (spec.tls)", Ordered, Label("tls"), func() {
	ctx := context.Background()
	const ns, name = "e2e-tls", "secure"
	serverName := name + "." + ns + ".svc"
	var pods []corev1.Pod
	serials := map[string]string{}

	BeforeAll(func() {
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(ns)))
		mustRun(helm(append([]string{"install", release, chart}, installArgs("--set", "test.namespace="+ns)...)...))
		mustRun(kubectlApply(tlsIssuerManifest(ns)))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "issuer/e2e-ca", "--timeout=2m"))
	})
	AfterEach(func() { dumpOnFailure(ns) })
	AfterAll(func() {
		mustRun(kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false"))
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
	})

	It("serves set/get over verified TLS on every pod, refuses plain text on the TLS port, and the exporter scrapes over loopback", func() {
		applied := time.Now()
		mustRun(kubectlApply(tlsFleetManifest(ns, name, 2)))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Ready", "memcached/"+name, "--timeout=3m"))
		AddReportEntry("TLS fleet of 2 applied → Ready (certificate issued, pods up)", time.Since(applied).Round(time.Second).String())
		Expect(mustRun(kubectl("get", "memcached", name, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="CertificateReady")].reason}`))).To(Equal("CertificateIssued"))
		Expect(mustRun(kubectl("get", "certificate", name, "-n", ns, "-o", "jsonpath={.metadata.ownerReferences[0].kind}/{.spec.secretName}"))).To(Equal("Memcached/" + name + "-tls"))
		Eventually(func(g Gomega) {
			pods = fleetPodList(ctx, g, ns, name)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Status.PodIP).NotTo(BeEmpty())
			}
		}).WithTimeout(wait).Should(Succeed())

		for _, p := range pods {
			out := probeLogOf(ctx, ns, "tls", withCA(0), "memcached-tls", p.Status.PodIP+":11211", "/ca/ca.crt", serverName)
			Expect(out).To(ContainSubstring("tls memcached set/get ok"), p.Name)
			m := servedSerial.FindStringSubmatch(out)
			Expect(m).To(HaveLen(2), out)
			serials[p.Name] = m[1]
			GinkgoWriter.Printf("%s: %s\n", p.Name, strings.TrimSpace(out))
			Expect(probeArgs(ctx, ns, "plain", "memcached-plain-refused", p.Status.PodIP+":11211")).To(ContainSubstring("refused"), p.Name)
			Expect(probeArgs(ctx, ns, "plainport", "memcached", p.Status.PodIP+":11311")).To(ContainSubstring("set/get ok"), "the plaintextPort the spec asked for")
			Expect(probe(ctx, ns, "metrics", "http", "http://"+p.Status.PodIP+":9150/metrics")).To(ContainSubstring("\nmemcached_up 1\n"), p.Name)
		}
		// Through the Service's name, as a client resolving it would.
		Expect(probeLogOf(ctx, ns, "svc", withCA(0), "memcached-tls", serverName+":11211", "/ca/ca.crt", serverName)).To(ContainSubstring("set/get ok"))
	})

	It("measures the TLS handshake and set/get latency against plain text on the same pod", func() {
		p := pods[0]
		withTLS := probeLogOf(ctx, ns, "lat-tls", withCA(0), "memcached-latency", p.Status.PodIP+":11211", "300", "/ca/ca.crt", serverName)
		plain := probeArgs(ctx, ns, "lat-plain", "memcached-latency", p.Status.PodIP+":11311", "300")
		GinkgoWriter.Printf("%s\n%s\n", strings.TrimSpace(withTLS), strings.TrimSpace(plain))
		AddReportEntry("latency over TLS (connect includes the handshake)", strings.TrimSpace(withTLS))
		AddReportEntry("latency over plain text, same pod", strings.TrimSpace(plain))
		Expect(withTLS).To(HavePrefix("tls "))
		Expect(plain).To(HavePrefix("plain "))
	})

	It("serves a renewed certificate on every pod without restarting or replacing one, and the exporter stays up", func() {
		before := podIdentity(pods)
		triggered := time.Now()
		// What `cmctl renew` does: an Issuing condition on the Certificate's status.
		mustRun(kubectl("patch", "certificate", name, "-n", ns, "--subresource=status", "--type=json", "-p",
			fmt.Sprintf(`[{"op":"add","path":"/status/conditions/-","value":{"type":"Issuing","status":"True","reason":"ManuallyTriggered","message":"e2e renewal","lastTransitionTime":%q}}]`,
				triggered.UTC().Format(time.RFC3339))))

		var waiting []*corev1.Pod
		for _, p := range pods {
			waiting = append(waiting, startProbe(ctx, ns, "renewed", withCA(4*time.Minute), "memcached-tls", p.Status.PodIP+":11211", "/ca/ca.crt", serverName, serials[p.Name]))
		}
		var slowest time.Duration
		for i, w := range waiting {
			out := probeLog(ctx, w)
			m := servedSerial.FindStringSubmatch(out)
			Expect(m).To(HaveLen(2), out)
			Expect(m[1]).NotTo(Equal(serials[pods[i].Name]), "a new serial")
			at := out[strings.LastIndex(out, " at ")+len(" at "):]
			served, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(at))
			Expect(err).NotTo(HaveOccurred(), out)
			took := served.Sub(triggered)
			GinkgoWriter.Printf("%s: serial %s → %s, served %s after the trigger\n", pods[i].Name, serials[pods[i].Name], m[1], took.Round(time.Millisecond))
			slowest = max(slowest, took)
			Expect(mustRun(kubectl("logs", "-n", ns, pods[i].Name, "-c", "auth-reloader"))).To(ContainSubstring("memcached reloaded its certificate"))
		}
		AddReportEntry("renewal triggered → new certificate served by every pod", slowest.Round(time.Millisecond).String())
		Expect(slowest).To(BeNumerically("<", 3*time.Minute))
		var after map[string]string
		Eventually(func(g Gomega) { after = podIdentity(fleetPodList(ctx, g, ns, name)) }).Should(Succeed())
		Expect(after).To(Equal(before), "same pods, no restart: the caches stay warm")
		AddReportEntry("pods before and after the renewal", fmt.Sprintf("%v", after))
		for _, p := range pods {
			Expect(probe(ctx, ns, "metrics", "http", "http://"+p.Status.PodIP+":9150/metrics")).To(ContainSubstring("\nmemcached_up 1\n"), p.Name)
		}
		Expect(mustRun(kubectl("get", "memcached", name, "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`))).To(Equal("True"))
	})
})

// probeLogOf runs the probe with shape and returns its output.
func probeLogOf(ctx context.Context, ns, name string, shape func(*corev1.PodSpec), args ...string) string {
	GinkgoHelper()
	return probeLog(ctx, startProbe(ctx, ns, name, shape, args...))
}
