package memcached

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/status"
)

// sliceFrom builds an EndpointSlice of the fleet "cache" from data, three
// bytes an endpoint: its conditions and reference kind, then a pod name.
func sliceFrom(data []byte) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: "cache-x1", Namespace: "ns", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "cache", desired.LabelManagedBy: desired.ManagedByValue,
				discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io",
			},
			Annotations:     map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-02T00:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "cache"}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("memcached"), Port: ptr.To[int32](11211)}},
	}
	tristate := func(b byte) *bool {
		switch b % 3 {
		case 1:
			return ptr.To(true)
		case 2:
			return ptr.To(false)
		}
		return nil
	}
	for i := 0; i+2 < len(data); i += 3 {
		flags, kind, name := data[i], data[i+1], data[i+2]
		ep := discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.0.0.%d", name)},
			NodeName:   ptr.To(fmt.Sprintf("node-%d", name%7)),
			Conditions: discoveryv1.EndpointConditions{Ready: tristate(flags), Serving: tristate(flags / 3), Terminating: tristate(flags / 9)},
		}
		switch kind % 3 {
		case 1:
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("cache-%d", name%5), UID: "p"}
		case 2:
			ep.TargetRef = &corev1.ObjectReference{Kind: "Node", Name: fmt.Sprintf("cache-%d", name%5)}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// FuzzReadinessOnly: what the operator reads of a slice, and how its events
// are mapped, indexed and filtered, is the same for the cached slice as for
// the one the API server sent; addresses, ports and nodes are not kept.
func FuzzReadinessOnly(f *testing.F) {
	f.Add([]byte{1, 1, 0, 1, 1, 1, 1, 1, 2}, []byte{1, 1, 0, 2, 1, 1})
	f.Add([]byte{0, 1, 3, 10, 1, 4, 2, 0, 1}, []byte{})
	f.Add([]byte{1, 2, 0, 19, 1, 1}, []byte{1, 1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		trim := func(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
			out, err := readinessOnly(s.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			return out.(*discoveryv1.EndpointSlice)
		}
		sa, sb := sliceFrom(a), sliceFrom(b)
		ta, tb := trim(sa), trim(sb)
		if got, want := status.ReadyPods([]discoveryv1.EndpointSlice{*ta, *tb}), status.ReadyPods([]discoveryv1.EndpointSlice{*sa, *sb}); !slices.Equal(got, want) {
			t.Fatalf("ReadyPods of the cached slices %v, of the sent ones %v", got, want)
		}
		if got, want := indexSliceFleet(ta), indexSliceFleet(sa); !slices.Equal(got, want) {
			t.Fatalf("index %v, want %v", got, want)
		}
		if got, want := sliceToMemcached(context.Background(), ta), sliceToMemcached(context.Background(), sa); !slices.Equal(got, want) {
			t.Fatalf("mapped to %v, want %v", got, want)
		}
		if got, want := readyPodsChanged.Update(event.UpdateEvent{ObjectOld: ta, ObjectNew: tb}),
			readyPodsChanged.Update(event.UpdateEvent{ObjectOld: sa, ObjectNew: sb}); got != want {
			t.Fatalf("update passed %v, want %v", got, want)
		}
		if ta.Name != sa.Name || ta.Namespace != sa.Namespace || ta.UID != sa.UID || ta.ResourceVersion != sa.ResourceVersion {
			t.Fatalf("identity not kept: %+v", ta.ObjectMeta)
		}
		if len(ta.Ports) > 0 || len(ta.Annotations) > 0 || len(ta.OwnerReferences) > 0 {
			t.Fatalf("ports or metadata kept: %+v", ta)
		}
		for _, ep := range ta.Endpoints {
			if len(ep.Addresses) > 0 || ep.NodeName != nil || ep.Conditions.Serving != nil || (ep.TargetRef != nil && ep.TargetRef.UID != "") {
				t.Fatalf("endpoint keeps more than it needs: %+v", ep)
			}
		}
	})
}

// TestOwnedKindsKeepWhatAPassReads: each owned kind's cache transform
// drops the managed fields for the digest of what the operator applied, and
// keeps what a pass reads: the metadata that maps an object to its fleet and
// its accepted rules, a Deployment's replicas and rollout status (a
// rollout past its deadline among it), a budget's allowed disruptions, a
// StatefulSet's template (the warm rollout compares pods with it).
func TestOwnedKindsKeepWhatAPassReads(t *testing.T) {
	g := NewWithT(t)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "cache", Namespace: "ns", UID: "u", Generation: 4,
			Labels:          map[string]string{desired.LabelManagedBy: desired.ManagedByValue},
			Annotations:     map[string]string{AcceptedRulesAnnotation: "spec.size"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Memcached", Name: "cache", UID: "mc", Controller: ptr.To(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: apply.FieldOwner, Operation: metav1.ManagedFieldsOperationApply,
				APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)}},
		}
	}
	template := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "memcached", Image: "memcached:1.6"}}}}
	stuck := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "m"}
	objects := []client.Object{
		&appsv1.Deployment{ObjectMeta: meta(), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: template},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Message: "m"}, stuck}}},
		&appsv1.StatefulSet{ObjectMeta: meta(), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Template: template}},
		&corev1.Service{ObjectMeta: meta(), Spec: corev1.ServiceSpec{ClusterIP: "None"}},
		&policyv1.PodDisruptionBudget{ObjectMeta: meta(), Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 3}},
		&networkingv1.NetworkPolicy{ObjectMeta: meta(), Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}},
	}
	transforms := map[string]func(any) (any, error){}
	for obj, by := range CacheOptions(nil).ByObject {
		transforms[fmt.Sprintf("%T", obj)] = by.Transform
	}
	for _, in := range objects {
		name := fmt.Sprintf("%T", in)
		transform := transforms[name]
		g.Expect(transform).NotTo(BeNil(), name)
		out, err := transform(in.DeepCopyObject())
		g.Expect(err).NotTo(HaveOccurred())
		cached := out.(client.Object)
		g.Expect(cached.GetManagedFields()).To(BeEmpty(), name)
		g.Expect(cached.GetAnnotations()).To(HaveKey(apply.AppliedDigest), name)
		g.Expect(cached.GetAnnotations()).To(HaveKeyWithValue(AcceptedRulesAnnotation, "spec.size"), name)
		g.Expect(cached.GetLabels()).To(Equal(in.GetLabels()), name)
		g.Expect(metav1.IsControlledBy(cached, &metav1.ObjectMeta{UID: "mc"})).To(BeTrue(), name)
		g.Expect(cached.GetGeneration()).To(Equal(int64(4)), name)
		switch c := cached.(type) {
		case *appsv1.Deployment:
			g.Expect(c.Spec).To(Equal(appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}), "no template")
			want := in.(*appsv1.Deployment).Status
			want.Conditions = []appsv1.DeploymentCondition{stuck}
			g.Expect(c.Status).To(Equal(want))
		case *appsv1.StatefulSet:
			g.Expect(c.Spec.Template).To(Equal(template))
		case *corev1.Service:
			g.Expect(c.Spec).To(BeZero())
		case *policyv1.PodDisruptionBudget:
			g.Expect(c.Status).To(Equal(policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1}))
		case *networkingv1.NetworkPolicy:
			g.Expect(c.Spec.PolicyTypes).To(BeEmpty())
		}
	}
}

// TestCachedObjectsShareRepeatedStrings: every cached kind keeps the shared
// copy of a label's key and value, an annotation's key, an owner's kind and
// a condition's type and reason, which each decoded object brings a copy
// of; what is not in the fixed set stays the object's own, and nothing
// changes value.
func TestCachedObjectsShareRepeatedStrings(t *testing.T) {
	g := NewWithT(t)
	// fresh copies, as a decoder makes them.
	fresh := func(s string) string { return strings.Clone(s) }
	freshMap := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[fresh(k)] = fresh(v)
		}
		return out
	}
	labels := map[string]string{
		desired.LabelName: desired.NameValue, desired.LabelInstance: "cache", desired.LabelManagedBy: desired.ManagedByValue,
		appsv1.DefaultDeploymentUniqueLabelKey: "7d9f8b5c4", corev1.LabelTopologyZone: "zone-a",
		discoveryv1.LabelServiceName: "cache", "team": "payments",
	}
	annotations := map[string]string{"deployment.kubernetes.io/revision": "2", "note": "kept"}
	sameData := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for obj, by := range CacheOptions(nil).ByObject {
		name := fmt.Sprintf("%T", obj)
		in := obj.DeepCopyObject().(client.Object)
		in.SetName("cache")
		in.SetNamespace("ns")
		in.SetLabels(freshMap(labels))
		in.SetAnnotations(freshMap(annotations))
		in.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: fresh("apps/v1"), Kind: fresh("Memcached"), Name: "cache", UID: "u"}})
		if mc, ok := in.(*cachev1alpha1.Memcached); ok {
			mc.Status.Conditions = []metav1.Condition{{Type: fresh(cachev1alpha1.ConditionAvailable), Reason: fresh(cachev1alpha1.ReasonAllReplicasReady), Message: "m"}}
		}
		out, err := by.Transform(in)
		g.Expect(err).NotTo(HaveOccurred(), name)
		got := out.(client.Object)
		g.Expect(got.GetLabels()).To(Equal(labels), name)
		for k, v := range got.GetLabels() {
			c, known := shared[k]
			g.Expect(sameData(k, c)).To(Equal(known), "%s: label key %q", name, k)
			if c, known := shared[v]; known {
				g.Expect(sameData(v, c)).To(BeTrue(), "%s: label value %q", name, v)
			}
		}
		for k := range got.GetAnnotations() {
			if c, known := shared[k]; known {
				g.Expect(sameData(k, c)).To(BeTrue(), "%s: annotation key %q", name, k)
			}
		}
		for _, r := range got.GetOwnerReferences() {
			g.Expect(sameData(r.Kind, shared["Memcached"])).To(BeTrue(), "%s: owner kind", name)
			g.Expect(sameData(r.APIVersion, shared["apps/v1"])).To(BeTrue(), "%s: owner API version", name)
		}
		if mc, ok := got.(*cachev1alpha1.Memcached); ok {
			c := mc.Status.Conditions[0]
			g.Expect(sameData(c.Type, shared[cachev1alpha1.ConditionAvailable])).To(BeTrue(), "condition type")
			g.Expect(sameData(c.Reason, shared[cachev1alpha1.ReasonAllReplicasReady])).To(BeTrue(), "condition reason")
			g.Expect(mc.ManagedFields).To(BeNil())
		}
	}
}
