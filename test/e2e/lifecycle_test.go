//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/memcached-operator/test/manifests"
)

// The lifecycle suite is what users live through after the first install:
// an upgrade of the operator (new chart, new image, a CRD that gained a
// field) and a rollback, with fleets serving all along. It runs with Helm 3
// in the full suite and again with Helm 4 (`make e2e E2E_HELM=helm4
// E2E_FLAGS=-ginkgo.label-filter=lifecycle`, part of `make test-e2e`).

const (
	lifecycleNamespace = "e2e-lifecycle"
	lifecycleFleets    = 5
	crdName            = "memcacheds.cache.example.com"
)

// chartVersion copies the chart into dir as version (chart and app
// version, so the operator image's tag follows), optionally with its CRD as
// it was before spec.networkPolicy existed.
func chartVersion(dir, version string, withoutNetworkPolicy bool) string {
	GinkgoHelper()
	src := filepath.Join(repoRoot(), chart)
	dst := filepath.Join(dir, "memcached-operator-"+version)
	Expect(filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})).To(Succeed())
	chartYAML := filepath.Join(dst, "Chart.yaml")
	data, err := os.ReadFile(chartYAML)
	Expect(err).NotTo(HaveOccurred())
	data = regexp.MustCompile(`(?m)^version: .*$`).ReplaceAll(data, []byte("version: "+version))
	data = regexp.MustCompile(`(?m)^appVersion: .*$`).ReplaceAll(data, []byte(`appVersion: "`+version+`"`))
	Expect(os.WriteFile(chartYAML, data, 0o644)).To(Succeed())
	if withoutNetworkPolicy {
		crdFile := filepath.Join(dst, "crds", "cache.example.com_memcacheds.yaml")
		data, err := os.ReadFile(crdFile)
		Expect(err).NotTo(HaveOccurred())
		crd := map[string]any{}
		Expect(yaml.Unmarshal(data, &crd)).To(Succeed())
		versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
		for _, v := range versions {
			unstructured.RemoveNestedField(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "networkPolicy")
		}
		Expect(unstructured.SetNestedSlice(crd, versions, "spec", "versions")).To(Succeed())
		out, err := yaml.Marshal(crd)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(crdFile, out, 0o644)).To(Succeed())
	}
	return dst
}

// crdHasNetworkPolicy tells whether the cluster's Memcached CRD declares
// spec.networkPolicy.
func crdHasNetworkPolicy(ctx context.Context, g Gomega) bool {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	g.Expect(k8s.Get(ctx, types.NamespacedName{Name: crdName}, crd)).To(Succeed())
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	g.Expect(versions).NotTo(BeEmpty())
	_, found, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "networkPolicy")
	return found
}

// fleetUIDs identify every memcached pod of the suite's fleets and the life
// of each of its containers: the pod's UID and the containers' restart
// counts, so a container restarted in place (its cache gone) is a change.
func fleetUIDs(ctx context.Context) map[string]string {
	GinkgoHelper()
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(lifecycleNamespace), client.HasLabels{"app.kubernetes.io/instance"})).To(Succeed())
	out := map[string]string{}
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Labels["app.kubernetes.io/instance"], "fleet-") && p.DeletionTimestamp == nil {
			id := string(p.UID)
			for _, c := range p.Status.ContainerStatuses {
				id += fmt.Sprintf(" %s:%d", c.Name, c.RestartCount)
			}
			out[p.Name] = id
		}
	}
	return out
}

// watchAvailable polls every fleet's Available condition each second until
// stop is called, and returns every time one was seen not True.
func watchAvailable(ctx context.Context, fleets []string) (stop func() []string) {
	var (
		mu    sync.Mutex
		drops []string
	)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(finished)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Second):
			}
			for _, name := range fleets {
				mc := &unstructured.Unstructured{}
				mc.SetAPIVersion("cache.example.com/v1alpha1")
				mc.SetKind("Memcached")
				if err := k8s.Get(ctx, types.NamespacedName{Namespace: lifecycleNamespace, Name: name}, mc); err != nil {
					continue // the API server's answer, not the fleet's
				}
				conds, _, _ := unstructured.NestedSlice(mc.Object, "status", "conditions")
				available := false
				for _, c := range conds {
					m := c.(map[string]any)
					if m["type"] == "Available" {
						available = m["status"] == string(metav1.ConditionTrue)
					}
				}
				if !available {
					mu.Lock()
					drops = append(drops, time.Now().Format(time.TimeOnly)+" "+name)
					mu.Unlock()
				}
			}
		}
	}()
	return func() []string {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return drops
	}
}

// operatorImages are the images the operator's pods run, once the rollout
// is complete.
func operatorImages(ctx context.Context, g Gomega) []string {
	pods := &corev1.PodList{}
	g.Expect(k8s.List(ctx, pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"app.kubernetes.io/component": "operator"})).To(Succeed())
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Spec.Containers[0].Image)
		}
	}
	return out
}

var _ = Describe("the operator's lifecycle with fleets serving", Ordered, Label("lifecycle"), func() {
	// Every object the chart installs is checked as Flux's health check
	// does (kstatus) after the install and after the upgrade.
	ctx := context.Background()
	var (
		chartA, chartB   string
		imageA, imageB   string
		fleets           []string
		uids             map[string]string
		loads            []*corev1.Pod
		stopAvailability func() []string
	)
	// haArgs are the values users run in production: two replicas (one
	// leads, both serve webhooks) and a PodDisruptionBudget.
	haArgs := func(extra ...string) []string {
		return installArgs(append([]string{"--set", "replicaCount=2", "--set", "test.namespace=" + lifecycleNamespace}, extra...)...)
	}

	BeforeAll(func() {
		Expect(images["OPERATOR_IMAGE"]).NotTo(BeEmpty(), "images.env has no OPERATOR_IMAGE")
		AddReportEntry("helm", mustRun(helm("version", "--short")))
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", operatorNamespace, lifecycleNamespace, "--ignore-not-found", "--wait", "--timeout=3m"))
		// Chart A must install its own, older CRD: Helm skips crds/ when
		// the CRD exists.
		mustRun(kubectl("delete", "crd", crdName, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(operatorNamespace) + "---\n" + namespaceManifest(lifecycleNamespace)))

		dir, err := os.MkdirTemp("", "e2e-lifecycle-charts-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, dir)
		chartA = chartVersion(dir, "0.0.9", true)
		chartB = chartVersion(dir, "0.2.0", false)
		// Two operator "versions": the testbed's image under the tags the
		// two charts default to.
		repo := images["OPERATOR_IMAGE"][:strings.LastIndex(images["OPERATOR_IMAGE"], ":")]
		imageA, imageB = repo+":0.0.9", repo+":0.2.0"
		for _, img := range []string{imageA, imageB} {
			cmd := exec.Command(filepath.Join(repoRoot(), "test", "testbed", "node.sh"), "tag-image", images["OPERATOR_IMAGE"], img)
			cmd.Env = append(cmd.Environ(), "TESTBED_DIR="+testbedDir())
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), "node.sh tag-image:\n%s", out)
		}
	})
	AfterEach(func() { dumpOnFailure(lifecycleNamespace, operatorNamespace) })
	AfterAll(func() {
		if stopAvailability != nil {
			stopAvailability()
		}
		_, _ = helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait")
		_, _ = kubectl("delete", "namespace", lifecycleNamespace, "--ignore-not-found", "--wait=false")
	})

	It("installs chart 0.0.9, whose CRD has no spec.networkPolicy, and runs five fleets under load", func() {
		mustRun(helm(append([]string{"install", release, chartA}, haArgs()...)...))
		Expect(crdHasNetworkPolicy(ctx, Default)).To(BeFalse(), "chart 0.0.9 installed its own CRD")
		chartObjectsCurrent(ctx)
		Eventually(func(g Gomega) []string { return operatorImages(ctx, g) }).WithTimeout(wait).Should(ConsistOf(imageA, imageA))
		for i := range lifecycleFleets {
			name := fmt.Sprintf("fleet-%d", i+1)
			fleets = append(fleets, name)
			mustRun(kubectlApply(fmt.Sprintf(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: %s, namespace: %s}
spec: {size: 2}
`, name, lifecycleNamespace)))
		}
		for _, name := range fleets {
			Eventually(func(g Gomega) {
				mc, err := getMemcached(lifecycleNamespace, name)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(meta.IsStatusConditionTrue(mc.Status.Conditions, "Available")).To(BeTrue())
				g.Expect(mc.Status.Nodes).To(HaveLen(2))
			}).WithTimeout(wait).Should(Succeed(), name)
		}
		uids = fleetUIDs(ctx)
		Expect(uids).To(HaveLen(2 * lifecycleFleets))
		for _, name := range fleets {
			// 20 set/get operations a second per fleet, until the last step
			// stops them (the bound is the probe's 10 minutes); a client that
			// ended sooner fails that step. The load outlives this spec: it
			// goes with the namespace.
			load := probePod(lifecycleNamespace, "load-"+name, nil,
				"load", name+"."+lifecycleNamespace+".svc.cluster.local", "11211", "20", "9m")
			Expect(k8s.Create(ctx, load)).To(Succeed())
			loads = append(loads, load)
		}
		for _, l := range loads {
			probeRunning(ctx, l)
		}
		stopAvailability = watchAvailable(ctx, fleets)
	})

	It("upgrades to chart 0.2.0: the hook upgrades the CRD, the new image rolls in, admission never fails, memcached pods stay", func() {
		stop := startAdmissions(ctx, lifecycleNamespace)
		start := time.Now()
		out := mustRun(helm(append([]string{"upgrade", release, chartB}, haArgs()...)...))
		took := time.Since(start)
		admissions := stop()
		AddReportEntry("upgrade 0.0.9 → 0.2.0", fmt.Sprintf("%s (helm upgrade --wait); %s", took.Round(time.Second), admissions))
		Expect(admissions.failed).To(BeZero(), "first failure: %v\n%s", admissions.first, out)
		Expect(admissions.attempts).To(BeNumerically(">", 10))
		Expect(crdHasNetworkPolicy(ctx, Default)).To(BeTrue(), "the pre-upgrade hook brought the CRD to 0.2.0's")
		Eventually(func(g Gomega) []string { return operatorImages(ctx, g) }).WithTimeout(wait).Should(ConsistOf(imageB, imageB))
		Expect(fleetUIDs(ctx)).To(Equal(uids), "an operator upgrade restarts no memcached pod")
		chartObjectsCurrent(ctx)
		_, err := kubectl("get", "job", "-n", operatorNamespace, release+"-crd-upgrade")
		Expect(err).To(HaveOccurred(), "the succeeded hook Job is deleted")
	})

	It("stores the field the new CRD brought, and the new operator acts on it", func() {
		mustRun(kubectl("patch", "memcached", fleets[0], "-n", lifecycleNamespace, "--type=merge", "-p", `{"spec":{"networkPolicy":{"enabled":true}}}`))
		mc, err := getMemcached(lifecycleNamespace, fleets[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(mc.Spec).To(HaveKey("networkPolicy"), "stored, not pruned")
		Eventually(func() error {
			return k8s.Get(ctx, types.NamespacedName{Namespace: lifecycleNamespace, Name: fleets[0]}, &networkingv1.NetworkPolicy{})
		}).WithTimeout(wait).Should(Succeed(), "the fleet's NetworkPolicy exists")
	})

	It("passes helm test on the upgraded release", func() {
		mustRun(helm("test", release, "-n", operatorNamespace, "--logs", "--timeout", "5m"))
	})

	It("rolls back to 0.0.9: the old image returns, the CRD keeps its field, admission never fails, memcached pods stay", func() {
		stop := startAdmissions(ctx, lifecycleNamespace)
		start := time.Now()
		mustRun(helm("rollback", release, "1", "-n", operatorNamespace, "--wait", "--timeout", "5m"))
		took := time.Since(start)
		admissions := stop()
		AddReportEntry("rollback 0.2.0 → 0.0.9", fmt.Sprintf("%s (helm rollback --wait); %s", took.Round(time.Second), admissions))
		Expect(admissions.failed).To(BeZero(), "first failure: %v", admissions.first)
		Eventually(func(g Gomega) []string { return operatorImages(ctx, g) }).WithTimeout(wait).Should(ConsistOf(imageA, imageA))
		Expect(crdHasNetworkPolicy(ctx, Default)).To(BeTrue(), "a rollback runs no upgrade hook: the CRD is never downgraded")
		mc, err := getMemcached(lifecycleNamespace, fleets[0])
		Expect(err).NotTo(HaveOccurred())
		Expect(mc.Spec).To(HaveKey("networkPolicy"))
		Expect(fleetUIDs(ctx)).To(Equal(uids))
	})

	It("refuses an upgrade to a chart whose CRD would drop a stored field, and changes nothing", func() {
		crdBefore := mustRun(kubectl("get", "crd", crdName, "-o", "jsonpath={.metadata.resourceVersion}"))
		podsBefore := operatorImages(ctx, Default)
		out, err := helm(append([]string{"upgrade", release, chartA}, haArgs("--timeout", "3m")...)...)
		Expect(err).To(HaveOccurred(), "the hook must fail the upgrade:\n%s", out)
		logs := mustRun(kubectl("logs", "-n", operatorNamespace, "job/"+release+"-crd-upgrade"))
		Expect(logs).To(ContainSubstring("would drop"))
		Expect(logs).To(ContainSubstring("spec.networkPolicy"))
		AddReportEntry("refused downgrade", strings.TrimSpace(logs))
		Expect(mustRun(kubectl("get", "crd", crdName, "-o", "jsonpath={.metadata.resourceVersion}"))).To(Equal(crdBefore))
		Expect(operatorImages(ctx, Default)).To(Equal(podsBefore))
		Expect(fleetUIDs(ctx)).To(Equal(uids))
		for _, l := range loads {
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(l), l)).To(Succeed())
			Expect(l.Status.Phase).To(Equal(corev1.PodRunning), "the clients ran through every step so far")
		}
	})

	It("kept every fleet Available and every client served throughout", func() {
		drops := stopAvailability()
		stopAvailability = nil
		Expect(drops).To(BeEmpty(), "a fleet was seen not Available")
		var total loadResult
		for _, l := range loads {
			stopProbe(ctx, l)
		}
		for _, l := range loads {
			res := parseLoad(probeLog(ctx, l))
			total.ops += res.ops
			total.failed += res.failed
			total.lost += res.lost
		}
		AddReportEntry("fleets' clients during upgrade, rollback and refused downgrade",
			fmt.Sprintf("%d set/get operations by %d clients, %d failed, %d keys lost", total.ops, len(loads), total.failed, total.lost))
		Expect(total.failed).To(BeZero())
		Expect(total.lost).To(BeZero())
	})

	It("uninstalls, leaving the CRD and the fleets", func() {
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--wait"))
		Expect(crdHasNetworkPolicy(ctx, Default)).To(BeTrue())
		Expect(fleetUIDs(ctx)).To(Equal(uids))
	})
})

// chartObjectsCurrent checks every object of the release's manifest the way
// Flux's health check does (kstatus): each must be Current.
func chartObjectsCurrent(ctx context.Context) {
	GinkgoHelper()
	objs, err := manifests.Decode(mustRun(helm("get", "manifest", release, "-n", operatorNamespace)))
	Expect(err).NotTo(HaveOccurred())
	objectsCurrent(ctx, objs, operatorNamespace)
}

// objectsCurrent waits until every one of objs is Current by kstatus;
// namespaced objects without a namespace are looked for in ns.
func objectsCurrent(ctx context.Context, objs []*unstructured.Unstructured, ns string) {
	GinkgoHelper()
	Expect(objs).NotTo(BeEmpty())
	Eventually(func(g Gomega) {
		for _, o := range objs {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(o.GroupVersionKind())
			key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
			namespaced, err := k8s.IsObjectNamespaced(o)
			g.Expect(err).NotTo(HaveOccurred())
			if namespaced && key.Namespace == "" {
				key.Namespace = ns
			}
			g.Expect(k8s.Get(ctx, key, live)).To(Succeed(), o.GetKind()+" "+o.GetName())
			res, err := kstatus.Compute(live)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), "%s %s: %s", o.GetKind(), o.GetName(), res.Message)
		}
	}).WithContext(ctx).WithTimeout(wait).Should(Succeed())
}
