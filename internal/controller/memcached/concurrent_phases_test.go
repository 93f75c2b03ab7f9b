package memcached

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// barrier holds each apply of an owned object until all kinds have sent
// theirs, so a pass whose phases ran one after another never gets past the
// first (it gives up after a while and says so).
type barrier struct {
	kinds   int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func (b *barrier) wait(obj runtime.ApplyConfiguration) error {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.kinds {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("apply of %T waited alone: the owned objects' phases did not run at once", obj)
	}
}

// liveReads fails every read from the API server: a new fleet's objects are
// created without one.
type liveReads struct{ client.Reader }

func (liveReads) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return fmt.Errorf("live read of %T %s", obj, key)
}

// TestNewFleetObjectsAreWrittenAtOnce: a new fleet's Deployment, Service and
// PodDisruptionBudget are applied concurrently in one pass, one request each
// (no live read first), and the pass reports one Created event naming the
// three in a fixed order.
func TestNewFleetObjectsAreWrittenAtOnce(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
	}

	var (
		mu      sync.Mutex
		applied []string
		b       = &barrier{kinds: 3, all: make(chan struct{})}
	)
	c := withFleetIndexes(fake.NewClientBuilder()).WithScheme(scheme).WithObjects(mc).WithStatusSubresource(mc).
		WithInterceptorFuncs(interceptor.Funcs{Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			mu.Lock()
			applied = append(applied, fmt.Sprintf("%T", obj))
			mu.Unlock()
			if err := b.wait(obj); err != nil {
				return err
			}
			return c.Apply(ctx, obj, opts...)
		}}).Build()
	events := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: liveReads{}, Recorder: events,
		Defaults: policy.Config{DefaultImage: "memcached:test"}}
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mc)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(applied).To(HaveLen(3), "one apply per owned object")
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(mc), obj)).To(Succeed())
	}
	g.Expect(events.Events).To(Receive(Equal("Normal Created created Deployment, Service and PodDisruptionBudget for cache")))
}
