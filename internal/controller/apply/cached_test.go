package apply

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

var (
	mc  = &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", ResourceVersion: "42"}}
	all = `{"f:metadata":{"f:labels":{"f:app":{}},"f:ownerReferences":{"k:{\"uid\":\"uid-1\"}":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"memcached\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`
	at  = metav1.NewTime(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
)

// ours is the operator's apply entry naming fields, as the API server
// writes it.
func ours(fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: FieldOwner, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
		Time: &at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

// stored is a Deployment of 3 replicas as the API server returns it after
// the operator applied build(3, image), with the deployment controller's
// status entry beside the operator's.
func stored(image string) *appsv1.Deployment {
	const replicas int32 = 3
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "dep-1", Generation: 1, ResourceVersion: "1",
			Labels:          map[string]string{"app": "cache"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(mc, cachev1alpha1.GroupVersion.WithKind("Memcached"))},
			ManagedFields: []metav1.ManagedFieldsEntry{ours(all), {Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:readyReplicas":{}}}`)}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "memcached", Image: image, Args: []string{"-m", "64"}}}}}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: replicas},
	}
}

func build(replicas int32, image string) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment("cache", "ns").WithLabels(map[string]string{"app": "cache"}).
		WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("cache.example.com/v1alpha1").WithKind("Memcached").
			WithName(mc.Name).WithUID(mc.UID).WithController(true).WithBlockOwnerDeletion(true)).
		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(replicas).WithTemplate(corev1ac.PodTemplateSpec().WithSpec(corev1ac.PodSpec().WithContainers(
			corev1ac.Container().WithName("memcached").WithImage(image)))))
}

func keepDeployment() func(any) (any, error) {
	return KeepApplied("Deployment", appsv1ac.ExtractDeployment, func(d *appsv1.Deployment) {
		d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas}
	})
}

// TestKeepAppliedKeepsADigestForTheManagedFields: the cached copy holds no
// managed fields and no template, but the digest of what the operator
// applied, equal to the digest of the request that applied it; a second
// transform (an informer streaming its initial list transforms twice)
// changes nothing.
func TestKeepAppliedKeepsADigestForTheManagedFields(t *testing.T) {
	g := NewWithT(t)
	keep := keepDeployment()
	out, err := keep(stored("memcached:1.6"))
	g.Expect(err).NotTo(HaveOccurred())
	cached := out.(*appsv1.Deployment)
	g.Expect(cached.ManagedFields).To(BeEmpty())
	g.Expect(cached.Spec.Template.Spec.Containers).To(BeEmpty(), "trimmed")
	g.Expect(cached.Spec.Replicas).To(Equal(ptr.To[int32](3)))
	g.Expect(cached.Status.ReadyReplicas).To(Equal(int32(3)))
	want, err := digestOf(build(3, "memcached:1.6"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cached.Annotations).To(HaveKeyWithValue(AppliedDigest, want))

	again, err := keep(cached.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(cached), "idempotent")

	other, _ := keep(stored("memcached:1.7"))
	g.Expect(other.(*appsv1.Deployment).Annotations[AppliedDigest]).NotTo(Equal(want), "another applied image, another digest")
}

// TestAppliedDigestCannotBeForged: the API server refuses the annotation's
// key, so no object it returns carries a digest the transform did not
// compute (validation shared with the API server).
func TestAppliedDigestCannotBeForged(t *testing.T) {
	g := NewWithT(t)
	errs := apimachineryvalidation.ValidateAnnotations(map[string]string{AppliedDigest: "0"}, field.NewPath("metadata", "annotations"))
	g.Expect(errs).NotTo(BeEmpty())
}

// TestIfChangedComparesDigests drives IfChanged over a Deployment as the
// operator's cache holds it: a pass whose desired object matches the digest
// applies nothing and extracts nothing; a field another manager took, a new
// desired object, or a copy without a digest is applied; an object read
// whole is extracted.
func TestIfChangedComparesDigests(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	keep := keepDeployment()
	var live *appsv1.Deployment
	cacheAs := func(d *appsv1.Deployment) {
		out, err := keep(d)
		g.Expect(err).NotTo(HaveOccurred())
		live = out.(*appsv1.Deployment)
	}
	sent := 0
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			live.DeepCopyInto(obj.(*appsv1.Deployment))
			return nil
		},
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			sent++
			return nil
		},
	}).Build()
	ap := &Applier{Client: c}
	byCache, byPass := testutil.ToFloat64(extractions.WithLabelValues("Deployment", "cache")), testutil.ToFloat64(extractions.WithLabelValues("Deployment", "pass"))
	extracted := 0
	extract := func(d *appsv1.Deployment, manager string) (*appsv1ac.DeploymentApplyConfiguration, error) {
		extracted++
		return appsv1ac.ExtractDeployment(d, manager)
	}
	// pass reports whether it extracted and whether it sent an apply.
	pass := func(replicas int32, image string) [2]bool {
		e, a := extracted, sent
		_, err := IfChanged(ctx, ap, mc, "Deployment", &appsv1.Deployment{}, build(replicas, image), extract)
		g.Expect(err).NotTo(HaveOccurred())
		return [2]bool{extracted > e, sent > a}
	}
	skipped, applied, extractedOnly := [2]bool{false, false}, [2]bool{false, true}, [2]bool{true, false}

	cacheAs(stored("memcached:1.6"))
	g.Expect(pass(3, "memcached:1.6")).To(Equal(skipped), "the cached digest matches: nothing extracted, nothing sent")
	g.Expect(pass(5, "memcached:1.6")).To(Equal(applied), "a new desired object")

	edited := stored("memcached:evil")
	edited.ManagedFields[0] = ours(`{"f:metadata":{"f:labels":{"f:app":{}},"f:ownerReferences":{"k:{\"uid\":\"uid-1\"}":{}}},"f:spec":{"f:replicas":{}}}`)
	cacheAs(edited)
	g.Expect(pass(3, "memcached:1.6")).To(Equal(applied), "an edit took the image from us: applied again")

	reset := stored("memcached:1.6")
	reset.ManagedFields = nil
	cacheAs(reset)
	g.Expect(pass(3, "memcached:1.6")).To(Equal(applied), "managed fields reset: nothing is known to be ours")

	live = stored("memcached:1.6")
	g.Expect(pass(3, "memcached:1.6")).To(Equal(extractedOnly), "an object read whole is extracted, and matches")
	live.ManagedFields[0] = ours(`{"f:spec":{"f:replicas":{}}}`)
	g.Expect(pass(3, "memcached:1.6")).To(Equal([2]bool{true, true}))

	g.Expect(testutil.ToFloat64(extractions.WithLabelValues("Deployment", "pass"))-byPass).To(Equal(float64(extracted)),
		"memcached_operator_apply_extractions_total counts the passes' extractions")
	g.Expect(testutil.ToFloat64(extractions.WithLabelValues("Deployment", "cache"))-byCache).To(Equal(3.0), "and the cache's")
}

// TestForgetDropsEverything: what the Applier remembers of a fleet's
// objects (the optional objects it gave) goes with Forget.
func TestForgetDropsEverything(t *testing.T) {
	g := NewWithT(t)
	a := &Applier{}
	fleet := types.NamespacedName{Namespace: "ns", Name: "cache"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	for _, key := range []types.NamespacedName{fleet, other} {
		for _, kind := range optionalKinds {
			a.gave.Store(optionalKey{kind, key}, struct{}{})
		}
	}
	g.Expect(a.Remembers(fleet)).To(HaveLen(len(optionalKinds)))
	a.Forget(fleet)
	g.Expect(a.Remembers(fleet)).To(BeEmpty())
	g.Expect(a.Remembers(other)).To(HaveLen(len(optionalKinds)), "another fleet's are kept")
}
