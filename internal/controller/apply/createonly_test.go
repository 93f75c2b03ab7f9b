package apply

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
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
