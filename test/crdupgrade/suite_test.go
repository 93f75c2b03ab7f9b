// Package crdupgrade_test proves the chart's CRD upgrade hook against a real
// API server: the hook's own RBAC, rendered from the chart and impersonated,
// brings an older CRD to the chart's, keeps stored objects, writes nothing
// when there is nothing to do, and refuses a downgrade. It has its own
// control plane because it rewrites the Memcached CRD, which every other
// suite relies on.
package crdupgrade_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/crdupgrade"
	"github.com/example/memcached-operator/test/chartrender"
	"github.com/example/memcached-operator/test/testenv"
)

const (
	release   = "mco"
	namespace = "operators"
	crdName   = "memcacheds.cache.example.com"
)

var (
	env    *envtest.Environment
	cfg    *rest.Config
	admin  client.Client
	scheme = runtime.NewScheme()
)

func TestCRDUpgrade(t *testing.T) {
	RegisterFailHandler(Fail)
	testenv.RunSpecs(t, "chart CRD upgrade hook (envtest)")
}

var _ = BeforeSuite(func() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextv1.AddToScheme(scheme))
	utilruntime.Must(cachev1alpha1.AddToScheme(scheme))
	var err error
	env, err = testenv.New(testenv.Options{})
	Expect(err).NotTo(HaveOccurred())
	cfg, err = env.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	admin, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(admin.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
})

// chartCRD is the CRD in the chart's crds/.
func chartCRD() *apiextv1.CustomResourceDefinition {
	data, err := os.ReadFile(filepath.Join(testenv.ChartDir(), "crds", "cache.example.com_memcacheds.yaml"))
	Expect(err).NotTo(HaveOccurred())
	crd, err := crdupgrade.Decode(data)
	Expect(err).NotTo(HaveOccurred())
	return crd
}

// withoutNetworkPolicy is the chart's CRD as an older chart had it, before
// spec.networkPolicy existed.
func withoutNetworkPolicy(crd *apiextv1.CustomResourceDefinition) *apiextv1.CustomResourceDefinition {
	old := crd.DeepCopy()
	for i := range old.Spec.Versions {
		spec := old.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		delete(spec.Properties, "networkPolicy")
		old.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	return old
}

// hookObjects renders the chart for an upgrade and returns its CRD upgrade
// hook's objects by kind.
func hookObjects(values map[string]any) map[string]*unstructured.Unstructured {
	return hookObjectsOf(release, values)
}

func hookObjectsOf(releaseName string, values map[string]any) map[string]*unstructured.Unstructured {
	objs, err := chartrender.RenderUpgrade(releaseName, namespace, values)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == "crd-upgrade" {
			Expect(o.GetAnnotations()).To(HaveKeyWithValue("helm.sh/hook", "pre-upgrade"), o.GetKind())
			out[o.GetKind()] = o
		}
	}
	return out
}

// memcachedWithPolicy is a Memcached that sets spec.networkPolicy.
func memcachedWithPolicy(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"size": int64(1), "networkPolicy": map[string]any{"enabled": true}},
	}}
	return u
}

// storedPolicy reads a Memcached back and tells whether it kept spec.networkPolicy.
func storedPolicy(ctx context.Context, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("cache.example.com/v1alpha1")
	u.SetKind("Memcached")
	Expect(admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)).To(Succeed())
	_, found, _ := unstructured.NestedMap(u.Object, "spec", "networkPolicy")
	return found
}

var _ = Describe("the pre-upgrade hook", Ordered, func() {
	var hook client.Client
	full := chartCRD()
	older := withoutNetworkPolicy(full)

	BeforeAll(func(ctx SpecContext) {
		objs := hookObjects(nil)
		Expect(objs).To(HaveKey("Job"))
		Expect(objs).To(HaveKey("ConfigMap"))
		By("the ConfigMap carries crds/ byte for byte")
		data, err := os.ReadFile(filepath.Join(testenv.ChartDir(), "crds", "cache.example.com_memcacheds.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(objs["ConfigMap"].Object["data"]).To(HaveKeyWithValue("crd.yaml", string(data)))

		By("installing the hook's ServiceAccount and RBAC as the chart renders them")
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
			Expect(objs).To(HaveKey(kind))
			Expect(admin.Create(ctx, objs[kind].DeepCopy())).To(Succeed(), kind)
		}
		impersonated := rest.CopyConfig(cfg)
		impersonated.Impersonate = rest.ImpersonationConfig{UserName: serviceaccount.MakeUsername(namespace, objs["ServiceAccount"].GetName())}
		hook, err = client.New(impersonated, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())

		By("the cluster has an older chart's CRD, without spec.networkPolicy")
		Eventually(func(g Gomega) {
			live := &apiextv1.CustomResourceDefinition{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: crdName}, live)).To(Succeed())
			live.Spec = older.Spec
			g.Expect(admin.Update(ctx, live)).To(Succeed())
		}).Should(Succeed())
		// The API server prunes a field its schema does not declare.
		Eventually(func(g Gomega) {
			probe := memcachedWithPolicy("probe")
			g.Expect(admin.Create(ctx, probe, client.DryRunAll)).To(Succeed())
			_, found, _ := unstructured.NestedMap(probe.Object, "spec", "networkPolicy")
			g.Expect(found).To(BeFalse())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(admin.Create(ctx, &cachev1alpha1.Memcached{
			ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: namespace},
			Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2)},
		})).To(Succeed())
	})

	It("upgrades the CRD with only its own RBAC, and the new field is then stored", func(ctx SpecContext) {
		outcome, err := crdupgrade.Upgrade(ctx, hook, full)
		Expect(err).NotTo(HaveOccurred())
		Expect(outcome).To(Equal(crdupgrade.Updated))
		// The API server serves the new schema moments after the update.
		Eventually(func(g Gomega) {
			probe := memcachedWithPolicy("after")
			g.Expect(admin.Create(ctx, probe, client.DryRunAll)).To(Succeed())
			_, found, _ := unstructured.NestedMap(probe.Object, "spec", "networkPolicy")
			g.Expect(found).To(BeTrue())
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(admin.Create(ctx, memcachedWithPolicy("after"))).To(Succeed())
		Expect(storedPolicy(ctx, "after")).To(BeTrue(), "spec.networkPolicy is stored after the upgrade")
		before := &cachev1alpha1.Memcached{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "before"}, before)).To(Succeed())
		Expect(*before.Spec.Size).To(Equal(int32(2)), "objects stored before the upgrade are kept")
	})

	It("writes nothing when the CRD already matches", func(ctx SpecContext) {
		live := &apiextv1.CustomResourceDefinition{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: crdName}, live)).To(Succeed())
		outcome, err := crdupgrade.Upgrade(ctx, hook, full)
		Expect(err).NotTo(HaveOccurred())
		Expect(outcome).To(Equal(crdupgrade.Unchanged))
		again := &apiextv1.CustomResourceDefinition{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: crdName}, again)).To(Succeed())
		Expect(again.ResourceVersion).To(Equal(live.ResourceVersion))
	})

	It("refuses a downgrade that would drop a field, and changes nothing", func(ctx SpecContext) {
		live := &apiextv1.CustomResourceDefinition{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: crdName}, live)).To(Succeed())
		_, err := crdupgrade.Upgrade(ctx, hook, older)
		Expect(err).To(MatchError(crdupgrade.ErrWouldDrop))
		Expect(err.Error()).To(ContainSubstring("v1alpha1: spec.networkPolicy"))
		again := &apiextv1.CustomResourceDefinition{}
		Expect(admin.Get(ctx, client.ObjectKey{Name: crdName}, again)).To(Succeed())
		Expect(again.ResourceVersion).To(Equal(live.ResourceVersion))
		Expect(storedPolicy(ctx, "after")).To(BeTrue(), "the stored field survives the refused downgrade")
	})

	It("serves what is stored as v1alpha1 as v1beta1 too, the same object", func(ctx SpecContext) {
		alpha, beta := &unstructured.Unstructured{}, &unstructured.Unstructured{}
		alpha.SetAPIVersion("cache.example.com/v1alpha1")
		beta.SetAPIVersion("cache.example.com/v1beta1")
		for _, u := range []*unstructured.Unstructured{alpha, beta} {
			u.SetKind("Memcached")
			Expect(admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "after"}, u)).To(Succeed())
		}
		Expect(beta.Object["spec"]).To(Equal(alpha.Object["spec"]))
		Expect(beta.GetUID()).To(Equal(alpha.GetUID()))
	})

	It("moves storage to v1beta1 with its own RBAC: every object rewritten, then v1beta1 alone in storedVersions; and back", func(ctx SpecContext) {
		storedVersions := func(g Gomega) []string {
			live := &apiextv1.CustomResourceDefinition{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Name: crdName}, live)).To(Succeed())
			return live.Status.StoredVersions
		}
		Expect(storedVersions(Default)).To(Equal([]string{"v1alpha1"}))
		migrated, err := crdupgrade.MigrateStorage(ctx, hook, crdName)
		Expect(err).NotTo(HaveOccurred())
		Expect(migrated).To(BeZero(), "nothing to do while the storage version is the one stored")

		for _, to := range []string{"v1beta1", "v1alpha1"} {
			By("a chart that stores " + to)
			next := full.DeepCopy()
			for i := range next.Spec.Versions {
				next.Spec.Versions[i].Storage = next.Spec.Versions[i].Name == to
			}
			Expect(crdupgrade.Upgrade(ctx, hook, next)).To(Equal(crdupgrade.Updated))
			Expect(storedVersions(Default)).To(ContainElement(to))
			migrated, err := crdupgrade.MigrateStorage(ctx, hook, crdName)
			Expect(err).NotTo(HaveOccurred())
			Expect(migrated).To(BeNumerically(">=", 2), "before and after")
			Expect(storedVersions(Default)).To(Equal([]string{to}))
			Expect(storedPolicy(ctx, "after")).To(BeTrue(), "objects keep their fields")
			before := &cachev1alpha1.Memcached{}
			Expect(admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "before"}, before)).To(Succeed())
			Expect(*before.Spec.Size).To(Equal(int32(2)))
		}
	})

	It("may touch no other CRD, and creates none", func(ctx SpecContext) {
		other := full.DeepCopy()
		other.Name = "widgets.example.com"
		other.Spec.Group = "example.com"
		other.Spec.Names = apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"}
		_, err := crdupgrade.Upgrade(ctx, hook, other)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(apierrors.IsForbidden(hook.Create(ctx, other.DeepCopy()))).To(BeTrue())
		Expect(apierrors.IsForbidden(hook.Delete(ctx, full.DeepCopy()))).To(BeTrue())

		By("a CRD that is not in the cluster is left missing, even by an admin")
		outcome, err := crdupgrade.Upgrade(ctx, admin, other)
		Expect(err).NotTo(HaveOccurred())
		Expect(outcome).To(Equal(crdupgrade.Missing))
		Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: other.Name}, &apiextv1.CustomResourceDefinition{}))).To(BeTrue())
	})
})

var _ = Describe("the hook's rendering", func() {
	It("exists only for an upgrade, and not when crds.upgrade is false", func() {
		installed, err := chartrender.Render(release, namespace, nil)
		Expect(err).NotTo(HaveOccurred())
		for _, o := range installed {
			Expect(o.GetLabels()["app.kubernetes.io/component"]).NotTo(Equal("crd-upgrade"),
				"`helm install` and `helm template` (GitOps) carry no hook: %s %s", o.GetKind(), o.GetName())
		}
		Expect(hookObjects(map[string]any{"crds": map[string]any{"upgrade": false}})).To(BeEmpty())
		objs := hookObjects(nil)
		job := objs["Job"]
		Expect(strings.Join(stringsAt(job, "spec", "template", "spec", "containers"), " ")).To(ContainSubstring("/memcached-crd-upgrade"))
	})

	It("is accepted by the API server as rendered (server-side dry run)", func(ctx SpecContext) {
		// Another release's names: the ordered specs create this one's.
		for kind, o := range hookObjectsOf("dry", nil) {
			Expect(admin.Create(ctx, o.DeepCopy(), client.DryRunAll)).To(Succeed(), kind)
		}
	})
})

// stringsAt flattens the command and args of the containers at path.
func stringsAt(u *unstructured.Unstructured, path ...string) []string {
	containers, _, _ := unstructured.NestedSlice(u.Object, path...)
	var out []string
	for _, c := range containers {
		m := c.(map[string]any)
		for _, k := range []string{"command", "args"} {
			if l, ok := m[k].([]any); ok {
				for _, s := range l {
					out = append(out, s.(string))
				}
			}
		}
	}
	return out
}
