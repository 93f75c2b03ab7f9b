package apply

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// TestOwnFieldsDigest: the digest covers our apply entry (its fields, its
// time, its API version) and the generation, and nothing another manager or
// a status update writes.
func TestOwnFieldsDigest(t *testing.T) {
	g := NewWithT(t)
	at := metav1.NewTime(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	entry := func(manager string, op metav1.ManagedFieldsOperationType, sub, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: sub, APIVersion: "apps/v1", Time: &at,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	ours := entry(FieldOwner, metav1.ManagedFieldsOperationApply, "", `{"f:spec":{"f:replicas":{}}}`)
	obj := func(gen int64, entries ...metav1.ManagedFieldsEntry) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen, ManagedFields: entries}}
	}
	base, ok := ownFieldsDigest(obj(1, ours))
	g.Expect(ok).To(BeTrue())

	status := entry("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", `{"f:status":{"f:readyReplicas":{}}}`)
	same, _ := ownFieldsDigest(obj(1, status, ours))
	g.Expect(same).To(Equal(base), "another manager's status entry does not count")

	_, ok = ownFieldsDigest(obj(1, entry(FieldOwner, metav1.ManagedFieldsOperationUpdate, "", `{"f:spec":{"f:replicas":{}}}`)))
	g.Expect(ok).To(BeFalse(), "an Update under our name is not our apply entry")
	_, ok = ownFieldsDigest(obj(1, entry(FieldOwner, metav1.ManagedFieldsOperationApply, "status", `{"f:status":{}}`)))
	g.Expect(ok).To(BeFalse(), "nor is an apply to the status subresource")
	_, ok = ownFieldsDigest(obj(1))
	g.Expect(ok).To(BeFalse(), "managed fields reset")

	moved := map[string]*appsv1.Deployment{
		"a field taken from us": obj(1, entry(FieldOwner, metav1.ManagedFieldsOperationApply, "", `{"f:spec":{}}`)),
		"the spec changed":      obj(2, ours),
	}
	later := ours
	later.Time = ptr.To(metav1.NewTime(at.Add(time.Second)))
	moved["an apply under our name changed the object"] = obj(1, later)
	other := ours
	other.APIVersion = "apps/v1beta2"
	moved["another API version"] = obj(1, other)
	for why, o := range moved {
		d, ok := ownFieldsDigest(o)
		g.Expect(ok).To(BeTrue(), why)
		g.Expect(d).NotTo(Equal(base), why)
	}
}

// TestLedgerSkipsExtractionUntilOwnFieldsMove drives IfChanged over a
// Deployment whose managed fields the test writes as the API server does
// (the fake client's server-side apply records fields the API server does
// not; the envtest drift spec checks the real one): once an extraction
// compared equal, passes over the same entry and desired object extract
// nothing, whatever else updates the object (its status); a field taken
// from us, an apply under our name, a spec change, a new desired object or
// another object of the name extracts again.
func TestLedgerSkipsExtractionUntilOwnFieldsMove(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	at := metav1.NewTime(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	ours := func(fields string, when metav1.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: FieldOwner, Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
			Time: &when, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	const all = `{"f:metadata":{"f:labels":{"f:app":{}},"f:ownerReferences":{"k:{\"uid\":\"uid-1\"}":{}}},"f:spec":{"f:replicas":{}}}`
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", ResourceVersion: "42"}}
	stored := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "dep-1", Generation: 1, ResourceVersion: "1",
			Labels: map[string]string{"app": "cache"}, OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(mc, cachev1alpha1.GroupVersion.WithKind("Memcached"))},
			ManagedFields: []metav1.ManagedFieldsEntry{ours(all, at)}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
	}
	sent := 0
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			stored.DeepCopyInto(obj.(*appsv1.Deployment))
			return nil
		},
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			sent++
			return nil
		},
	}).Build()
	ap := &Applier{Client: c}
	counted := testutil.ToFloat64(extractions.WithLabelValues("Deployment"))
	extracted := 0
	extract := func(d *appsv1.Deployment, manager string) (*appsv1ac.DeploymentApplyConfiguration, error) {
		extracted++
		return appsv1ac.ExtractDeployment(d, manager)
	}
	build := func(replicas int32) *appsv1ac.DeploymentApplyConfiguration {
		return appsv1ac.Deployment("cache", "ns").WithLabels(map[string]string{"app": "cache"}).
			WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion("cache.example.com/v1alpha1").WithKind("Memcached").
				WithName(mc.Name).WithUID(mc.UID).WithController(true).WithBlockOwnerDeletion(true)).
			WithSpec(appsv1ac.DeploymentSpec().WithReplicas(replicas))
	}
	// pass reports whether it extracted and whether it sent an apply.
	pass := func(replicas int32) [2]bool {
		e, a := extracted, sent
		_, err := IfChanged(ctx, ap, mc, "Deployment", &appsv1.Deployment{}, build(replicas), extract)
		g.Expect(err).NotTo(HaveOccurred())
		return [2]bool{extracted > e, sent > a}
	}
	extractedOnly, skipped, applied := [2]bool{true, false}, [2]bool{false, false}, [2]bool{true, true}

	g.Expect(pass(3)).To(Equal(extractedOnly), "the first pass extracts, and finds the object as it should be")
	for range 3 {
		g.Expect(pass(3)).To(Equal(skipped), "the next ones need not")
	}

	stored.ResourceVersion = "2"
	stored.Status.ReadyReplicas = 2
	stored.ManagedFields = append(stored.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kube-controller-manager",
		Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:readyReplicas":{}}}`)})
	g.Expect(pass(3)).To(Equal(skipped), "a status update leaves our entry and the generation alone")

	edited := *stored.DeepCopy()
	stored.ResourceVersion, stored.Generation, stored.Spec.Replicas = "3", 2, ptr.To[int32](7)
	stored.ManagedFields[0] = ours(`{"f:metadata":{"f:labels":{"f:app":{}},"f:ownerReferences":{"k:{\"uid\":\"uid-1\"}":{}}}}`, at)
	g.Expect(pass(3)).To(Equal(applied), "an edit took the field from us: compared, and reverted")
	g.Expect(pass(3)).To(Equal(applied), "until our entry moves, an apply is never assumed to have worked")

	edited.ResourceVersion, edited.Generation = "4", 3
	edited.ManagedFields[0] = ours(all, metav1.NewTime(at.Add(time.Minute)))
	stored = &edited
	g.Expect(pass(3)).To(Equal(extractedOnly), "our apply reverted it")
	g.Expect(pass(3)).To(Equal(skipped))

	stored.ResourceVersion, stored.Spec.Replicas = "5", ptr.To[int32](4)
	stored.ManagedFields[0] = ours(all, metav1.NewTime(at.Add(2*time.Minute)))
	g.Expect(pass(3)).To(Equal(applied), "an apply under our name by another process (an old replica) moved the entry's time")

	stored.ResourceVersion, stored.Generation, stored.Spec.Replicas = "6", 4, ptr.To[int32](3)
	g.Expect(pass(3)).To(Equal(extractedOnly), "a spec change by anyone moves the generation")
	g.Expect(pass(5)).To(Equal(applied), "a new desired object")

	ap.applied.forget(client.ObjectKeyFromObject(mc))
	g.Expect(pass(3)).To(Equal(extractedOnly), "a forgotten fleet extracts again")
	g.Expect(pass(3)).To(Equal(skipped))
	stored.UID = "dep-2"
	g.Expect(pass(3)).To(Equal(extractedOnly), "a record is of one object, not of its name")
	g.Expect(ap.applied.holds("Service", stored, mustDigest(g, build(3)))).To(BeFalse(), "nor of another kind")

	g.Expect(testutil.ToFloat64(extractions.WithLabelValues("Deployment"))-counted).To(Equal(float64(extracted)),
		"memcached_operator_apply_extractions_total counts the extractions")
}

func mustDigest(g Gomega, desired any) [32]byte {
	d, err := desiredDigest(desired)
	g.Expect(err).NotTo(HaveOccurred())
	return d
}

// TestForgetDropsEverything: what the Applier remembers of a fleet's
// objects (the ledger, the optional objects it gave) goes with Forget.
func TestForgetDropsEverything(t *testing.T) {
	g := NewWithT(t)
	a := &Applier{}
	fleet := types.NamespacedName{Namespace: "ns", Name: "cache"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	for _, key := range []types.NamespacedName{fleet, other} {
		for _, kind := range ledgerKinds {
			a.applied.m.Store(ledgerKey{kind, key}, ledgerEntry{})
		}
		for _, kind := range optionalKinds {
			a.gave.Store(optionalKey{kind, key}, struct{}{})
		}
	}
	g.Expect(a.Remembers(fleet)).To(HaveLen(len(ledgerKinds) + len(optionalKinds)))
	a.Forget(fleet)
	g.Expect(a.Remembers(fleet)).To(BeEmpty())
	g.Expect(a.Remembers(other)).To(HaveLen(len(ledgerKinds)+len(optionalKinds)), "another fleet's are kept")
}
