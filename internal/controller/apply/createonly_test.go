package apply

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// TestOwnObjectTheCacheHasNotSeen: the create-only apply of an object that
// exists, ours but not yet in the cache, answers Conflict; the operator reads
// it live, finds it its own, and applies on the condition that it is still
// the object read. (The envtest contract suite runs the same against a real
// API server, for every kind.)
func TestOwnObjectTheCacheHasNotSeen(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", ResourceVersion: "42"}}
	ours := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "cache", UID: "uid-1", Controller: ptr.To(true)}}}}
	var rvs []string
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ours).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			d := obj.(*appsv1ac.DeploymentApplyConfiguration)
			rvs = append(rvs, ptr.Deref(d.ResourceVersion, "<none>"))
			if ptr.Deref(d.ResourceVersion, "") == "42" {
				return apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "cache", nil)
			}
			return c.Apply(ctx, obj, opts...)
		}}).Build()
	cacheMiss := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "cache")
		}})
	stored := &appsv1.Deployment{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(ours), stored)).To(Succeed())
	a := &Applier{Client: cacheMiss, APIReader: c}
	live := &appsv1.Deployment{}
	desired := appsv1ac.Deployment("cache", "ns").WithLabels(map[string]string{"a": "b"})
	created, err := IfChanged(context.Background(), a, mc, "Deployment", live, desired, appsv1ac.ExtractDeployment)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeFalse(), "it existed")
	g.Expect(rvs).To(Equal([]string{"42", stored.ResourceVersion}), "create-only first, then on the condition that it is the object read")
	g.Expect(live.Labels).To(HaveKeyWithValue("a", "b"))
}

// TestACreationTheCacheHasNotShownWaits: a pass that finds missing from the
// cache an object this process created sends nothing and says the cache is
// behind, until the cache shows the object or CacheWait passes; a fleet
// recreated under the name does not wait on its predecessor's objects.
func TestACreationTheCacheHasNotShownWaits(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	applies := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			applies++
			return c.Apply(ctx, obj, opts...)
		}}).Build()
	hidden := false // the cache has not shown the object yet
	cache := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if hidden {
				return apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", ResourceVersion: "42"}}
	fleet := client.ObjectKeyFromObject(mc)
	run := func(a *Applier, mc *cachev1alpha1.Memcached) error {
		desired := appsv1ac.Deployment("cache", "ns").WithLabels(map[string]string{"a": "b"}).
			WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("cache.example.com/v1alpha1").WithKind("Memcached").
				WithName(mc.Name).WithUID(mc.UID).WithController(true))
		_, err := IfChanged(context.Background(), a, mc, "Deployment", &appsv1.Deployment{}, desired, appsv1ac.ExtractDeployment)
		return err
	}
	newApplier := func() *Applier {
		return &Applier{Client: cache, APIReader: c, Now: func() time.Time { return now }}
	}

	a := newApplier()
	hidden = true
	g.Expect(run(a, mc)).To(Succeed())
	g.Expect(applies).To(Equal(1), "created")
	g.Expect(a.Remembers(fleet)).To(ContainElement("created Deployment"))

	waited := testutil.ToFloat64(applyRequests.WithLabelValues("Deployment", applyWaited))
	g.Expect(run(a, mc)).To(MatchError(ErrCacheBehind), "the next pass, on a cache that has not shown it")
	g.Expect(applies).To(Equal(1), "sends nothing")
	g.Expect(testutil.ToFloat64(applyRequests.WithLabelValues("Deployment", applyWaited))-waited).To(Equal(1.0), "and counts the wait")

	now = now.Add(CacheWait - time.Millisecond)
	g.Expect(run(a, mc)).To(MatchError(ErrCacheBehind), "still within CacheWait")
	recreated := mc.DeepCopy()
	recreated.UID = "uid-2"
	g.Expect(errors.Is(run(a, recreated), ErrCacheBehind)).To(BeFalse(), "a fleet recreated under the name waits on nothing")
	g.Expect(applies).To(BeNumerically(">", 1))

	a, applies = newApplier(), 0
	g.Expect(c.Delete(context.Background(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}})).To(Succeed())
	g.Expect(run(a, mc)).To(Succeed())
	now = now.Add(CacheWait)
	g.Expect(errors.Is(run(a, mc), ErrCacheBehind)).To(BeFalse(), "past CacheWait, a miss is an object gone")
	g.Expect(applies).To(BeNumerically(">", 1), "and it is applied again")
	g.Expect(a.Remembers(fleet)).NotTo(ContainElement("created Deployment"))

	a, applies = newApplier(), 0
	g.Expect(c.Delete(context.Background(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}})).To(Succeed())
	g.Expect(run(a, mc)).To(Succeed())
	hidden = false
	g.Expect(run(a, mc)).To(Succeed(), "the cache shows it")
	g.Expect(a.Remembers(fleet)).NotTo(ContainElement("created Deployment"), "which ends the wait")
	hidden = true
	g.Expect(errors.Is(run(a, mc), ErrCacheBehind)).To(BeFalse(), "a later miss is an object deleted, not one on its way")

	a = newApplier()
	g.Expect(c.Delete(context.Background(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}})).To(Succeed())
	g.Expect(run(a, mc)).To(Succeed())
	g.Expect(a.Remembers(fleet)).To(ContainElement("created Deployment"))
	a.Forget(fleet)
	g.Expect(a.Remembers(fleet)).To(BeEmpty(), "Forget drops it")
}

// TestTheAnswerIsDecodedIntoACopy: the client decodes the API server's
// answer to an apply into the configuration it sent, writing into the maps
// it finds there. A builder's configuration may share a map with the
// cached Memcached or with its package's defaults, so the answer goes into
// a copy: the shared map keeps its values, and live still gets the answer.
// For a creation and for a drift repair.
func TestTheAnswerIsDecodedIntoACopy(t *testing.T) {
	scheme := runtime.NewScheme()
	NewWithT(t).Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", ResourceVersion: "42"}}
	ours := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "cache", UID: "uid-1", Controller: ptr.To(true)}}}}
	// The answer as the API server would give it, with a limit the
	// desired object does not hold (a defaulting webhook's, say).
	answer := `{"metadata":{"name":"cache","namespace":"ns","resourceVersion":"7"},"spec":{"template":{"spec":{"containers":[{"name":"memcached","resources":{"limits":{"memory":"999Mi"}}}]}}}}`
	for name, existing := range map[string][]client.Object{"creation": nil, "drift repair": {ours}} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(existing...).WithInterceptorFuncs(interceptor.Funcs{
				Apply: func(_ context.Context, _ client.WithWatch, obj runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
					return json.Unmarshal([]byte(answer), obj)
				}}).Build()
			shared := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
			desired := appsv1ac.Deployment("cache", "ns").WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("memcached").
					WithResources(corev1ac.ResourceRequirements().WithLimits(shared))))))
			live := &appsv1.Deployment{}
			_, err := IfChanged(context.Background(), &Applier{Client: c}, mc, "Deployment", live, desired, appsv1ac.ExtractDeployment)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(shared.Memory().String()).To(Equal("64Mi"), "the shared map is not written")
			g.Expect(live.Spec.Template.Spec.Containers).To(HaveLen(1))
			g.Expect(live.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("999Mi"), "live holds the answer")
			g.Expect(live.ResourceVersion).To(Equal("7"))
		})
	}
}
