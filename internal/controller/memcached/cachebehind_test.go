package memcached

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/policy"
)

// TestPassBeforeTheCacheShowsItsCreationsWritesNothing: the creation event
// of a new fleet's first object can start its next pass while the cache has
// not shown the others. That pass writes nothing (no apply, no status, no
// event) and the fleet is looked at again; once the cache shows them, the
// fleet reports no failure.
func TestPassBeforeTheCacheShowsItsCreationsWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 1, ResourceVersion: "5"},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
	}
	var writes atomic.Int32
	api := withFleetIndexes(fake.NewClientBuilder()).WithScheme(scheme).WithReturnManagedFields().
		WithObjects(mc).WithStatusSubresource(mc, &appsv1.Deployment{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				writes.Add(1)
				return c.Apply(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				writes.Add(1)
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	var hideDeployment atomic.Bool
	cache := interceptor.NewClient(api, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*appsv1.Deployment); ok && hideDeployment.Load() {
				return apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: cache, APIReader: api, Recorder: recorder, Defaults: policy.Config{DefaultImage: "memcached:test"}}
	pass := func() ctrl.Result {
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mc)})
		g.Expect(err).NotTo(HaveOccurred())
		return res
	}

	pass()
	g.Expect(writes.Load()).To(BeNumerically(">=", 3), "the first pass creates the fleet's objects")

	writes.Store(0)
	hideDeployment.Store(true)
	g.Expect(pass()).To(Equal(ctrl.Result{RequeueAfter: apply.CacheWait}), "looked at again")
	g.Expect(writes.Load()).To(BeZero(), "a pass on a cache behind its own creations writes nothing")
	g.Expect(recorder.Events).To(BeEmpty())

	hideDeployment.Store(false)
	pass()
	g.Expect(recorder.Events).To(BeEmpty(), "nor once the cache shows them")
	got := &cachev1alpha1.Memcached{}
	g.Expect(api.Get(ctx, client.ObjectKeyFromObject(mc), got)).To(Succeed())
	g.Expect(got.Status.Conditions).To(ContainElement(And(
		HaveField("Type", cachev1alpha1.ConditionDegraded), HaveField("Status", metav1.ConditionFalse))))
}
