//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/memcached-operator/test/manifests"
)

// GitOps tools (Argo CD, Flux) render the chart with `helm template` and
// apply the output server-side, over and over. Without cert-manager the
// operator keeps its own webhook certificate, so a render carries no
// certificate data and every sync is the same bytes: re-applying never
// breaks admission.
const (
	gitopsRelease   = "mco-gitops"
	gitopsNamespace = "e2e-gitops"
	// The webhooks never judge their own release's namespace: admissions
	// are tried in another one.
	gitopsApps = "e2e-gitops-apps"
)

var _ = Describe("the chart rendered by helm template and applied server-side (GitOps), without cert-manager", Ordered, Label("gitops"), func() {
	ctx := context.Background()
	var manifest string

	// render is `helm template`, with the CRD as GitOps tools apply it.
	render := func(extra ...string) string {
		GinkgoHelper()
		args := append([]string{"template", gitopsRelease, chart, "--namespace", gitopsNamespace, "--include-crds",
			"--set", "certManager.enabled=false",
			"--set", "replicaCount=2",
			"--set", "operator.defaultImage=" + images["MEMCACHED_IMAGE"],
			"--set", "test.enabled=false"}, extra...)
		return mustRun(helm(args...))
	}
	apply := func(m string) {
		GinkgoHelper()
		mustRun(cli("kubectl", m, "apply", "--server-side", "--force-conflicts", "--field-manager=argocd-controller", "-f", "-"))
	}
	webhookState := func() (secret map[string][]byte, bundles []string) {
		GinkgoHelper()
		s := &corev1.Secret{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: gitopsNamespace, Name: gitopsRelease + "-memcached-operator-webhook-certs"}, s)).To(Succeed())
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, types.NamespacedName{Name: gitopsRelease + "-memcached-operator"}, vwc)).To(Succeed())
		for _, w := range vwc.Webhooks {
			bundles = append(bundles, string(w.ClientConfig.CABundle))
		}
		return s.Data, bundles
	}

	BeforeAll(func() {
		// No Helm release of the suite may judge Memcacheds meanwhile.
		mustRun(helm("uninstall", release, "-n", operatorNamespace, "--ignore-not-found", "--wait"))
		mustRun(kubectl("delete", "namespace", gitopsNamespace, gitopsApps, "--ignore-not-found", "--wait", "--timeout=3m"))
		mustRun(kubectlApply(namespaceManifest(gitopsNamespace) + "---\n" + namespaceManifest(gitopsApps)))
		manifest = render()
		DeferCleanup(func() {
			// Cluster-scoped objects are no Helm release's: delete them with
			// the rest, or the next `helm install` could not own them. The
			// CRD stays, as it does on `helm uninstall`.
			objs, err := manifests.Decode(manifest)
			Expect(err).NotTo(HaveOccurred())
			for _, o := range objs {
				if o.GetKind() != "CustomResourceDefinition" {
					_, _ = kubectl("delete", o.GetKind()+"/"+o.GetName(), "-n", gitopsNamespace, "--ignore-not-found", "--wait=false")
				}
			}
			_, _ = kubectl("delete", "namespace", gitopsNamespace, gitopsApps, "--ignore-not-found", "--wait=false")
		})
	})
	AfterEach(func() { dumpOnFailure(gitopsNamespace) })

	It("renders the same bytes twice, with no certificate in them", func() {
		Expect(render()).To(Equal(manifest), "two renders differ: every GitOps sync would change the cluster")
		objs, err := manifests.Decode(manifest)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			if o.GetKind() == "Secret" {
				Expect(o.Object).NotTo(HaveKey("data"), o.GetName())
			}
		}
	})

	It("installs a working operator: Ready means admitting, every object Current (kstatus)", func() {
		start := time.Now()
		apply(manifest)
		mustRun(kubectl("rollout", "status", "deployment", "-n", gitopsNamespace, gitopsRelease+"-memcached-operator", "--timeout=3m"))
		AddReportEntry("kubectl apply --server-side to rolled out", time.Since(start).Round(time.Second).String())
		// The first admission after the rollout: readiness waited for
		// both webhook configurations to trust the served certificate.
		_, err := kubectlApply(`apiVersion: cache.example.com/v1alpha1
kind: Memcached
metadata: {name: first, namespace: `+gitopsApps+`}
spec: {size: 1}`, "--dry-run=server")
		Expect(err).NotTo(HaveOccurred())
		objs, err := manifests.Decode(manifest)
		Expect(err).NotTo(HaveOccurred())
		objectsCurrent(ctx, objs, gitopsNamespace)
	})

	It("keeps admitting through two syncs in a row and a sync that rolls the operator", func() {
		secretBefore, bundlesBefore := webhookState()
		Expect(secretBefore).To(HaveKey("ca.crt"), "the operator filled the Secret")
		stop := startAdmissions(ctx, gitopsApps)
		apply(render())
		apply(render())
		secretAfter, bundlesAfter := webhookState()
		Expect(secretAfter).To(Equal(secretBefore), "a sync leaves the certificate alone")
		Expect(bundlesAfter).To(Equal(bundlesBefore), "a sync leaves the caBundle alone")
		// A change synced from Git rolls both replicas: each new pod serves
		// the certificate of the Secret before it is Ready.
		changed := render("--set", "operator.logLevel=debug")
		apply(changed)
		manifest = changed
		mustRun(kubectl("rollout", "status", "deployment", "-n", gitopsNamespace, gitopsRelease+"-memcached-operator", "--timeout=3m"))
		admissions := stop()
		AddReportEntry("GitOps syncs", fmt.Sprintf("two identical renders and one that rolls the operator applied server-side: %s", admissions))
		Expect(admissions.failed).To(BeZero(), "first failure: %v", admissions.first)
		Expect(admissions.attempts).To(BeNumerically(">", 10))
	})
})
