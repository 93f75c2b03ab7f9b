//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The chart and the images as users get them: from an OCI registry that
// requires credentials (make cluster-up REGISTRY=1). The chart is packaged,
// pushed with helm and installed from oci://; the operator image comes from
// the registry by image.registry + image.repository + image.digest, with a
// pull Secret, under a repository name that no node had imported; a fleet's
// memcached (and exporter) images come from it with spec.imagePullSecrets.
// That the nodes really pulled from the registry is read in the registry's
// own access log: the manifest GET, answered 200, from the pod's node. The
// registry and helm's registry commands live in the testbed's network
// namespace: helm runs there (the testbed's helm-netns wrapper).
var _ = Describe("OCI distribution: the chart and the images from a registry with credentials", Ordered, Label("oci"), func() {
	ctx := context.Background()
	const (
		ns         = "e2e-oci"
		pullSecret = "registry-credentials"
		fleet      = "from-registry"
	)
	var (
		reg                  map[string]string
		host                 string
		opRepo, opDigest     string
		mcImage, mcRepo      string
		chartRef, version    string
		registryConfig, work string
	)
	// helmNet runs helm inside the testbed's network namespace, where the
	// registry is, with a registry config of the suite's own.
	helmNet := func(stdin string, args ...string) (string, error) {
		return cli("helm-netns", stdin, append(args, "--registry-config", registryConfig)...)
	}
	// ociArgs install or upgrade the chart from the registry, its image from
	// the registry too; extra adds values.
	ociArgs := func(verb string, extra ...string) []string {
		return append([]string{verb, release, chartRef, "--version", version, "--ca-file", reg["REGISTRY_CA"],
			"--namespace", operatorNamespace,
			"--set", "image.registry=" + host,
			"--set", "image.repository=" + opRepo,
			"--set", "image.digest=" + opDigest,
			"--set", "operator.defaultImage=" + images["MEMCACHED_IMAGE"],
			"--set", "test.memcached=true",
			"--set", "test.namespace=" + ns,
		}, extra...)
	}

	BeforeAll(func() {
		Expect(cluster["REGISTRY"]).To(Equal("1"),
			"this testbed has no registry: start it with `make cluster-up REGISTRY=1` (`make test-e2e` does)")
		var err error
		reg, err = readEnv(filepath.Join(testbedDir(), "registry.env"))
		Expect(err).NotTo(HaveOccurred())
		host = reg["REGISTRY_HOST"]
		Expect(host).NotTo(BeEmpty())
		opRepo, opDigest = splitDigestRef(reg["REGISTRY_OPERATOR_IMAGE"], host)
		mcImage = reg["REGISTRY_MEMCACHED_IMAGE"]
		mcRepo, _ = splitDigestRef(mcImage, host)
		work = GinkgoT().TempDir()
		registryConfig = filepath.Join(work, "registry.json")

		By("no node holds the registry's operator image yet (the pulls below are the first)")
		nodes := &corev1.NodeList{}
		Expect(k8s.List(ctx, nodes)).To(Succeed())
		for _, n := range nodes.Items {
			for _, img := range n.Status.Images {
				for _, name := range img.Names {
					Expect(name).NotTo(HavePrefix(host+"/"+opRepo),
						"node %s already has %s (a kept cluster): the unauthenticated pull below needs a fresh one", n.Name, name)
				}
			}
		}
		Expect(images["OPERATOR_IMAGE"]).NotTo(HavePrefix(host+"/"+opRepo), "the imported operator image must have another name")

		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", operatorNamespace, ns, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(ns)))
		// A docker-registry Secret, given on stdin (the suite logs command lines).
		auth := base64.StdEncoding.EncodeToString([]byte(reg["REGISTRY_USER"] + ":" + reg["REGISTRY_PASSWORD"]))
		dockerConfig, err := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
		Expect(err).NotTo(HaveOccurred())
		for _, n := range []string{operatorNamespace, ns} {
			mustRun(kubectlApply(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: %s}
type: kubernetes.io/dockerconfigjson
data: {.dockerconfigjson: %s}
`, pullSecret, n, base64.StdEncoding.EncodeToString(dockerConfig))))
		}
	})
	AfterEach(func() { dumpOnFailure(ns) })
	AfterAll(func() {
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false"))
	})

	It("packages the chart and pushes it with helm: refused without credentials, stored with them", func() {
		out := mustRun(helm("package", chart, "--destination", work))
		tgz := strings.TrimSpace(out[strings.LastIndex(out, ":")+1:])
		version = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(tgz), "memcached-operator-"), ".tgz")
		Expect(version).To(MatchRegexp(`^\d+\.\d+\.\d+`))
		chartRef = "oci://" + host + "/charts/memcached-operator"

		By("helm push without a login: the registry asks for credentials")
		out, err := helmNet("", "push", tgz, "oci://"+host+"/charts", "--ca-file", reg["REGISTRY_CA"])
		Expect(err).To(HaveOccurred())
		Expect(out).To(MatchRegexp(`(?i)401|unauthorized|basic credential not found`))
		AddReportEntry("helm push without login", out)

		mustRun(helmNet(reg["REGISTRY_PASSWORD"], "registry", "login", host, "--ca-file", reg["REGISTRY_CA"],
			"--username", reg["REGISTRY_USER"], "--password-stdin"))
		start := time.Now()
		out = mustRun(helmNet("", "push", tgz, "oci://"+host+"/charts", "--ca-file", reg["REGISTRY_CA"]))
		AddReportEntry("helm push of the chart", time.Since(start).String())
		Expect(out).To(ContainSubstring("Pushed: " + host + "/charts/memcached-operator:" + version))
		Expect(mustRun(helmNet("", "show", "chart", chartRef, "--version", version, "--ca-file", reg["REGISTRY_CA"]))).
			To(ContainSubstring("version: " + version))
	})

	It("installs from oci:// without a pull Secret: the operator pod cannot pull, the registry refused it (401)", func() {
		since := time.Now()
		mustRun(helmNet("", ociArgs("install")...))
		var pod corev1.Pod
		var reason, message string
		Eventually(func(g Gomega) {
			pod = operatorPods(ctx, g)[0]
			g.Expect(pod.Status.ContainerStatuses).To(HaveLen(1))
			w := pod.Status.ContainerStatuses[0].State.Waiting
			g.Expect(w).NotTo(BeNil())
			g.Expect(w.Reason).To(BeElementOf("ErrImagePull", "ImagePullBackOff"))
			reason = w.Reason
			// The kubelet's failure, with the runtime's words, is an event
			// of the pod (the waiting message of ImagePullBackOff is only
			// "Back-off pulling image").
			events, err := clientset.CoreV1().Events(operatorNamespace).List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + pod.Name + ",reason=Failed",
			})
			g.Expect(err).NotTo(HaveOccurred())
			message = ""
			for _, e := range events.Items {
				if strings.Contains(e.Message, "Failed to pull image") {
					message = e.Message
				}
			}
			g.Expect(message).To(MatchRegexp(`(?i)401 Unauthorized|authorization failed|unauthorized`))
		}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		AddReportEntry("operator pod without a pull Secret", reason+": "+message)
		Expect(message).To(ContainSubstring(host + "/" + opRepo + "@" + opDigest))

		By("the registry logged the node's request for the manifest, refused with 401")
		Eventually(func() string { return registryLog(since) }).WithTimeout(30 * time.Second).Should(
			MatchRegexp(`(?m)^%s - \S+ \[[^]]+\] "(HEAD|GET) /v2/%s/manifests/%s HTTP/[0-9.]+" 401 `,
				regexp.QuoteMeta(pod.Status.HostIP), regexp.QuoteMeta(opRepo), regexp.QuoteMeta(opDigest)))
	})

	It("upgrades from oci:// with imagePullSecrets: the operator is pulled from the registry, rolls out, helm test passes", func() {
		since := time.Now()
		start := time.Now()
		mustRun(helmNet("", ociArgs("upgrade", "--set", "imagePullSecrets[0].name="+pullSecret, "--wait", "--timeout", "5m")...))
		AddReportEntry("helm upgrade from oci:// with the pull Secret to the operator Ready", time.Since(start).String())
		operatorRolledOut()
		var pods []corev1.Pod
		Eventually(func(g Gomega) {
			pods = operatorPods(ctx, g)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
				g.Expect(p.Status.ContainerStatuses[0].Ready).To(BeTrue())
			}
		}).WithTimeout(wait).Should(Succeed())
		for _, p := range pods {
			Expect(p.Spec.Containers[0].Image).To(Equal(host + "/" + opRepo + "@" + opDigest))
			Expect(p.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: pullSecret}))
			Expect(p.Status.ContainerStatuses[0].ImageID).To(Equal(host + "/" + opRepo + "@" + opDigest))
		}
		pod := pods[0]

		By("the registry served the manifest and the layer (a blob of 100 kB or more; the config is < 1 kB) to the pod's node")
		pulled := fmt.Sprintf(`(?m)^%s - \S+ \[[^]]+\] "GET /v2/%s/%%s/sha256:[0-9a-f]{64} HTTP/[0-9.]+" 200 %%s .*containerd`,
			regexp.QuoteMeta(pod.Status.HostIP), regexp.QuoteMeta(opRepo))
		Eventually(func() string { return registryLog(since) }).WithTimeout(30 * time.Second).Should(And(
			MatchRegexp(fmt.Sprintf(pulled, "manifests", `\d+`)), MatchRegexp(fmt.Sprintf(pulled, "blobs", `\d{6,}`))))

		By("helm test: its pod runs the check from the same registry image, with the same pull Secret")
		mustRun(helm("test", release, "-n", operatorNamespace, "--logs", "--timeout", "5m"))
		check := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: release + "-test-check"}, check)).To(Succeed())
		Expect(check.Status.Phase).To(Equal(corev1.PodSucceeded))
		Expect(check.Status.ContainerStatuses[0].ImageID).To(Equal(host + "/" + opRepo + "@" + opDigest))
	})

	It("runs a fleet whose memcached and exporter images come from the registry with spec.imagePullSecrets", func() {
		since := time.Now()
		start := time.Now()
		mustRun(kubectlApply(fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: %s, namespace: %s}
spec:
  size: 2
  image: %s
  imagePullSecrets: [{name: %s}]
  monitoring:
    exporter: {enabled: true}
`, fleet, ns, mcImage, pullSecret)))
		mustRun(kubectl("wait", "-n", ns, "--for=condition=Available", "memcached/"+fleet, "--timeout=3m"))
		AddReportEntry("fleet of 2 from the registry to Available", time.Since(start).String())
		Eventually(func(g Gomega) {
			pods := fleetPodList(ctx, g, ns, fleet)
			g.Expect(pods).To(HaveLen(2))
			for _, p := range pods {
				g.Expect(p.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: pullSecret}))
				ids := map[string]string{}
				for _, c := range p.Status.ContainerStatuses {
					ids[c.Name] = c.ImageID
				}
				g.Expect(ids).To(HaveLen(2), "memcached and its exporter in %s", p.Name)
				g.Expect(ids).To(ContainElements(mcImage, host+"/"+opRepo+"@"+opDigest), p.Name)
			}
		}).WithTimeout(wait).WithPolling(time.Second).Should(Succeed())
		Expect(registryLog(since)).To(And(
			MatchRegexp(`(?m) "GET /v2/%s/manifests/sha256:[0-9a-f]{64} HTTP/[0-9.]+" 200 `, regexp.QuoteMeta(mcRepo)),
			MatchRegexp(`(?m) "GET /v2/%s/blobs/sha256:[0-9a-f]{64} HTTP/[0-9.]+" 200 \d{6,} `, regexp.QuoteMeta(mcRepo))))
	})

	It("uninstalls cleanly", func() {
		mustRun(kubectl("delete", "memcached", fleet, "-n", ns, "--wait", "--timeout=2m"))
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--wait"))
		Expect(mustRun(helm("list", "-n", operatorNamespace, "-q"))).To(BeEmpty())
		Eventually(func(g Gomega) []string {
			pods := &corev1.PodList{}
			g.Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace))).To(Succeed())
			var left []string
			for _, p := range pods.Items {
				left = append(left, p.Name)
			}
			return left
		}).WithTimeout(wait).Should(ConsistOf(release+"-test-check"),
			"only helm test's pod is left: Helm keeps test hooks (hook-delete-policy before-hook-creation) after uninstall")
		mustRun(kubectl("delete", "pod", release+"-test-check", "-n", operatorNamespace, "--wait"))
	})
})

// splitDigestRef splits HOST/REPOSITORY@DIGEST into REPOSITORY and DIGEST.
func splitDigestRef(ref, host string) (repo, digest string) {
	GinkgoHelper()
	name, digest, ok := strings.Cut(ref, "@")
	Expect(ok).To(BeTrue(), "%q has no digest", ref)
	repo, ok = strings.CutPrefix(name, host+"/")
	Expect(ok).To(BeTrue(), "%q is not in %s", ref, host)
	return repo, digest
}

// registryLog is the registry's access log (the testbed's logs folder) from
// since on: the Apache-style lines, "ADDR - USER [TIME] "METHOD URI PROTO"
// STATUS SIZE "REFERER" "AGENT"".
func registryLog(since time.Time) string {
	b, err := os.ReadFile(filepath.Join(testbedDir(), "logs", "registry.log"))
	if err != nil {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		m := accessTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		t, err := time.Parse("02/Jan/2006:15:04:05 -0700", m[1])
		if err == nil && !t.Before(since.Truncate(time.Second)) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

var accessTime = regexp.MustCompile(`^\S+ - \S+ \[([^]]+)\] "`)
