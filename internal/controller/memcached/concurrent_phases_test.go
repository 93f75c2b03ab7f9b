package memcached

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
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
// (no live read first). This fleet's first pass failed, so building them is
// news: one Created event names the three in a fixed order.
func TestNewFleetObjectsAreWrittenAtOnce(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	mc := &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
		Status: cachev1alpha1.MemcachedStatus{Conditions: []metav1.Condition{{Type: cachev1alpha1.ConditionDegraded,
			Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonReconcileFailed, Message: "the last pass failed"}}},
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

// resizeRig is a fake API server holding a fleet of 3 rolled out and
// reported Available, then given a new generation by edit. Once armed, status
// writes and Deployment applies are counted, and the apply answers applyErr.
type resizeRig struct {
	c            client.Client
	r            *Reconciler
	mc           *cachev1alpha1.Memcached
	armed        atomic.Bool
	applyErr     error
	statusWrites atomic.Int32
	applies      atomic.Int32
	events       *events.FakeRecorder
	// appliesDone counts the Deployment applies answered, and
	// appliedBeforeStatus is what it was when the first status write
	// arrived; -1 before one does.
	appliesDone, appliedBeforeStatus atomic.Int32
}

func newResizeRig(t *testing.T, g Gomega) *resizeRig {
	t.Helper()
	return newRig(t, g, func(spec *cachev1alpha1.MemcachedSpec) { spec.Size = ptr.To[int32](5) })
}

func newRig(t *testing.T, g Gomega, edit func(*cachev1alpha1.MemcachedSpec)) *resizeRig {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	g.Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	g.Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	rig := &resizeRig{}
	rig.appliedBeforeStatus.Store(-1)
	rig.mc = &cachev1alpha1.Memcached{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 1},
		Spec:       cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](3)},
	}
	rig.c = withFleetIndexes(fake.NewClientBuilder()).WithScheme(scheme).WithReturnManagedFields().
		WithObjects(rig.mc).WithStatusSubresource(rig.mc, &appsv1.Deployment{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				if _, ok := obj.(*appsv1ac.DeploymentApplyConfiguration); ok && rig.armed.Load() {
					rig.applies.Add(1)
					if rig.applyErr != nil {
						return rig.applyErr
					}
					defer rig.appliesDone.Add(1)
					return applyMovingGeneration(ctx, c, obj.(*appsv1ac.DeploymentApplyConfiguration), opts...)
				}
				return c.Apply(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if _, ok := obj.(*cachev1alpha1.Memcached); ok && rig.armed.Load() {
					rig.statusWrites.Add(1)
					rig.appliedBeforeStatus.CompareAndSwap(-1, rig.appliesDone.Load())
				}
				return c.SubResource(sub).Patch(ctx, obj, p, opts...)
			},
		}).Build()
	rig.events = events.NewFakeRecorder(20)
	rig.r = &Reconciler{Client: rig.c, APIReader: rig.c, Recorder: rig.events, Defaults: policy.Config{DefaultImage: "memcached:test"}}

	g.Expect(rig.pass()).To(Succeed())
	dep := &appsv1.Deployment{}
	g.Expect(rig.c.Get(ctx, client.ObjectKeyFromObject(rig.mc), dep)).To(Succeed())
	dep.Generation = 1
	g.Expect(rig.c.Update(ctx, dep)).To(Succeed())
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	g.Expect(rig.c.Status().Update(ctx, dep)).To(Succeed())
	g.Expect(rig.pass()).To(Succeed())
	g.Expect(rig.condition(g, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "the fleet of 3 is Ready before the resize")

	for len(rig.events.Events) > 0 {
		<-rig.events.Events // the fleet's creation and first Available
	}
	g.Expect(rig.c.Get(ctx, client.ObjectKeyFromObject(rig.mc), rig.mc)).To(Succeed())
	edit(&rig.mc.Spec)
	rig.mc.Generation = 2
	g.Expect(rig.c.Update(ctx, rig.mc)).To(Succeed())
	rig.armed.Store(true)
	return rig
}

// applyMovingGeneration applies and does what the fake client leaves out:
// the API server moves a Deployment's generation when its spec changes, and
// answers with it.
func applyMovingGeneration(ctx context.Context, c client.WithWatch, answer *appsv1ac.DeploymentApplyConfiguration, opts ...client.ApplyOption) error {
	key := client.ObjectKey{Namespace: *answer.Namespace, Name: *answer.Name}
	before := &appsv1.Deployment{}
	switch err := c.Get(ctx, key, before); {
	case apierrors.IsNotFound(err):
		return c.Apply(ctx, answer, opts...) // a create: generation 1
	case err != nil:
		return err
	}
	if err := c.Apply(ctx, answer, opts...); err != nil {
		return err
	}
	stored := &appsv1.Deployment{}
	if err := c.Get(ctx, key, stored); err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(before.Spec, stored.Spec) {
		return nil
	}
	stored.Generation++
	if err := c.Update(ctx, stored); err != nil {
		return err
	}
	answer.Generation, answer.ResourceVersion = ptr.To(stored.Generation), ptr.To(stored.ResourceVersion)
	return nil
}

func (rig *resizeRig) pass() error {
	_, err := rig.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rig.mc)})
	return err
}

func (rig *resizeRig) fleet(g Gomega) *cachev1alpha1.Memcached {
	got := &cachev1alpha1.Memcached{}
	g.Expect(rig.c.Get(context.Background(), client.ObjectKeyFromObject(rig.mc), got)).To(Succeed())
	return got
}

func (rig *resizeRig) condition(g Gomega, t string) metav1.Condition {
	c := meta.FindStatusCondition(rig.fleet(g).Status.Conditions, t)
	g.Expect(c).NotTo(BeNil(), t)
	return *c
}

// TestResizeIsReportedAfterTheApply: the first pass of a resize writes one
// status, after the Deployment's apply: the new generation, rolling out, 3
// of 5 pods available while scaling up.
func TestResizeIsReportedAfterTheApply(t *testing.T) {
	g := NewWithT(t)
	rig := newResizeRig(t, g)
	g.Expect(rig.fleet(g).Generation).To(Equal(int64(2)), "the fake API server keeps the generation it is given")

	g.Expect(rig.pass()).To(Succeed())
	g.Expect(rig.applies.Load()).To(Equal(int32(1)))
	g.Expect(rig.statusWrites.Load()).To(Equal(int32(1)))
	g.Expect(rig.appliedBeforeStatus.Load()).To(Equal(int32(1)), "the status was written after the apply")
	st := rig.fleet(g).Status
	g.Expect(st.ObservedGeneration).To(Equal(int64(2)))
	for _, c := range st.Conditions {
		g.Expect(c.ObservedGeneration).To(Equal(int64(2)), c.Type)
	}
	g.Expect(rig.condition(g, cachev1alpha1.ConditionAvailable)).To(And(
		HaveField("Status", metav1.ConditionFalse), HaveField("Reason", cachev1alpha1.ReasonScalingUp),
		HaveField("Message", "3 of 5 pods available; scaling up, and no ready pod was lost")))
	g.Expect(rig.condition(g, cachev1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(rig.condition(g, cachev1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(rig.condition(g, cachev1alpha1.ConditionProgressing).Message).To(Equal("the Deployment has not yet observed the spec applied to it"))
	dep := &appsv1.Deployment{}
	g.Expect(rig.c.Get(context.Background(), client.ObjectKeyFromObject(rig.mc), dep)).To(Succeed())
	g.Expect(*dep.Spec.Replicas).To(Equal(int32(5)))

	// The fake client records an empty status as applied, so the next pass
	// applies the Deployment again; only its status is looked at.
	rig.armed.Store(false)
	before := rig.fleet(g).ResourceVersion
	g.Expect(rig.pass()).To(Succeed())
	g.Expect(rig.fleet(g).ResourceVersion).To(Equal(before), "the next pass finds no status to write")
}

// TestResizeWhoseApplyFailsReportsTheFailure: when the apply is refused,
// the one status the pass writes says so.
func TestResizeWhoseApplyFailsReportsTheFailure(t *testing.T) {
	g := NewWithT(t)
	rig := newResizeRig(t, g)
	rig.applyErr = apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "cache", nil)

	g.Expect(rig.pass()).To(HaveOccurred(), "a refused apply stalls the fleet")
	g.Expect(rig.statusWrites.Load()).To(Equal(int32(1)))
	g.Expect(rig.condition(g, cachev1alpha1.ConditionStalled)).To(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("Reason", cachev1alpha1.ReasonApplyRejected), HaveField("ObservedGeneration", int64(2))))
	g.Expect(rig.condition(g, cachev1alpha1.ConditionReady).Reason).To(Equal(cachev1alpha1.ReasonApplyRejected))
}

// TestDeletedDeploymentIsRecreatedBeforeItIsReported: a Deployment deleted
// under a fleet whose generation was observed is no new generation: it is
// recreated first and the status, computed from the answer, written after.
func TestDeletedDeploymentIsRecreatedBeforeItIsReported(t *testing.T) {
	g := NewWithT(t)
	rig := newRig(t, g, func(*cachev1alpha1.MemcachedSpec) {})
	// newRig gave the fleet a generation 2 with the same spec: observe it.
	rig.armed.Store(false)
	g.Expect(rig.pass()).To(Succeed())
	g.Expect(rig.fleet(g).Status.ObservedGeneration).To(Equal(int64(2)))
	g.Expect(rig.c.Delete(context.Background(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}})).To(Succeed())

	rig.armed.Store(true)
	g.Expect(rig.pass()).To(Succeed())
	g.Expect(rig.applies.Load()).To(Equal(int32(1)), "the Deployment is recreated")
	g.Expect(rig.statusWrites.Load()).To(Equal(int32(1)))
	g.Expect(rig.appliedBeforeStatus.Load()).To(Equal(int32(1)), "the status was written after the create, from its answer")
	g.Expect(rig.condition(g, cachev1alpha1.ConditionAvailable).Status).To(Equal(metav1.ConditionFalse))
}

// TestNewGenerationThatLeavesTheDeploymentSpecIsWrittenOnce: a spec change
// that does not change the Deployment's spec (its disruption budget), in a
// pass that applies the Deployment for another reason (a label someone else
// changed), writes one status: Ready for the new generation.
func TestNewGenerationThatLeavesTheDeploymentSpecIsWrittenOnce(t *testing.T) {
	g := NewWithT(t)
	rig := newRig(t, g, func(spec *cachev1alpha1.MemcachedSpec) {
		spec.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(2))}
	})
	dep := &appsv1.Deployment{}
	g.Expect(rig.c.Get(context.Background(), client.ObjectKeyFromObject(rig.mc), dep)).To(Succeed())
	dep.Labels[desired.LabelManagedBy] = "someone"
	g.Expect(rig.c.Update(context.Background(), dep, client.FieldOwner("someone"))).To(Succeed())

	g.Expect(rig.pass()).To(Succeed())
	g.Expect(rig.applies.Load()).To(Equal(int32(1)), "the label is put back")
	g.Expect(rig.statusWrites.Load()).To(Equal(int32(1)))
	g.Expect(rig.condition(g, cachev1alpha1.ConditionReady)).To(And(
		HaveField("Status", metav1.ConditionTrue), HaveField("ObservedGeneration", int64(2))))
}

// rollout sets the Deployment's status as its controller would for the
// resized fleet: 5 pods, all updated, ready of them ready and available.
func (rig *resizeRig) rollout(g Gomega, ready int32) {
	const replicas = 5
	dep := &appsv1.Deployment{}
	g.Expect(rig.c.Get(context.Background(), client.ObjectKeyFromObject(rig.mc), dep)).To(Succeed())
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready}
	g.Expect(rig.c.Status().Update(context.Background(), dep)).To(Succeed())
}

// TestScaleUpSendsNoEventUnlessAPodIsLost: Available goes False while a
// fleet grows, since fewer pods than its size serve, but that is what the
// user asked for: no event on the way in (ScalingUp) nor on the way out. A
// ready pod lost meanwhile is a loss like any other: a Warning, and a Normal
// event when the fleet is Available again.
func TestScaleUpSendsNoEventUnlessAPodIsLost(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprintf("a pod lost: %v", lost), func(t *testing.T) {
			g := NewWithT(t)
			rig := newRig(t, g, func(spec *cachev1alpha1.MemcachedSpec) { spec.Size = ptr.To[int32](5) })
			available := func(status metav1.ConditionStatus, reason string) {
				g.Expect(rig.pass()).To(Succeed())
				g.Expect(rig.condition(g, cachev1alpha1.ConditionAvailable)).To(And(HaveField("Status", status), HaveField("Reason", reason)))
			}
			available(metav1.ConditionFalse, cachev1alpha1.ReasonScalingUp)
			rig.rollout(g, 4)
			available(metav1.ConditionFalse, cachev1alpha1.ReasonScalingUp)
			g.Expect(rig.events.Events).To(BeEmpty(), "growing is not news")
			if lost {
				rig.rollout(g, 3)
				available(metav1.ConditionFalse, cachev1alpha1.ReasonReplicasNotReady)
				g.Expect(rig.events.Events).To(Receive(Equal("Warning ReplicasNotReady Available is False: 3 of 5 pods available")))
			}
			rig.rollout(g, 5)
			available(metav1.ConditionTrue, cachev1alpha1.ReasonAllReplicasReady)
			if lost {
				g.Expect(rig.events.Events).To(Receive(Equal("Normal AllReplicasReady Available is True: 5 of 5 pods available")))
			}
			g.Expect(rig.events.Events).To(BeEmpty())
		})
	}
}

// TestHeldProgressIsLookedAtAgainBehindOtherFleets: a pass that held back a
// report of progress asks to be run again when it is due, at low priority,
// so that fleets with work to do go first; a pass with nothing held asks
// for nothing.
func TestHeldProgressIsLookedAtAgainBehindOtherFleets(t *testing.T) {
	g := NewWithT(t)
	rig := newRig(t, g, func(spec *cachev1alpha1.MemcachedSpec) { spec.Size = ptr.To[int32](5) })
	rig.r.writer().interval = time.Hour
	g.Expect(rig.pass()).To(Succeed())
	rig.rollout(g, 4)
	res, err := rig.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rig.mc)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically("~", time.Hour, time.Minute), "the 4th pod ready is progress, held")
	g.Expect(res.Priority).To(Equal(ptr.To(handler.LowPriority)))
	rig.rollout(g, 5)
	res, err = rig.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rig.mc)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(ctrl.Result{}), "Available: written, nothing held")
}

// TestDeletedFleetIsForgotten: what the Reconciler keeps about a fleet (its
// last status write, the optional objects it gave) goes when the fleet does.
func TestDeletedFleetIsForgotten(t *testing.T) {
	g := NewWithT(t)
	rig := newResizeRig(t, g)
	key := client.ObjectKeyFromObject(rig.mc)
	g.Expect(rig.r.remembers(key)).To(ContainElements("last status write"))
	g.Expect(rig.c.Delete(context.Background(), rig.fleet(g))).To(Succeed())
	g.Expect(rig.pass()).To(Succeed())
	g.Expect(rig.r.remembers(key)).To(BeEmpty(), "a fleet recreated under the same name starts from nothing")
}

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
	failures := reconcileFailures()
	g.Expect(pass()).To(Equal(ctrl.Result{RequeueAfter: apply.CacheWait}), "looked at again")
	g.Expect(writes.Load()).To(BeZero(), "a pass on a cache behind its own creations writes nothing")
	g.Expect(reconcileFailures()).To(Equal(failures), "and counts no failure")
	g.Expect(recorder.Events).To(BeEmpty())

	hideDeployment.Store(false)
	pass()
	g.Expect(recorder.Events).To(BeEmpty(), "nor once the cache shows them")
	got := &cachev1alpha1.Memcached{}
	g.Expect(api.Get(ctx, client.ObjectKeyFromObject(mc), got)).To(Succeed())
	g.Expect(got.Status.Conditions).To(ContainElement(And(
		HaveField("Type", cachev1alpha1.ConditionDegraded), HaveField("Status", metav1.ConditionFalse))))
}

// reconcileFailures is the sum of memcached_operator_reconcile_errors_total
// over every phase and reason.
func reconcileFailures() float64 {
	ch := make(chan prometheus.Metric, 100)
	reconcileErrors.Collect(ch)
	close(ch)
	sum := 0.0
	for m := range ch {
		var d dto.Metric
		_ = m.Write(&d)
		sum += d.GetCounter().GetValue()
	}
	return sum
}
