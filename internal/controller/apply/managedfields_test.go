package apply

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKeepOwnManagedFields: the cached object keeps only the operator's
// entries, and no dropped entry stays reachable behind the kept ones (the
// backing array of a slice filtered in place would hold them).
func TestKeepOwnManagedFields(t *testing.T) {
	g := NewWithT(t)
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	for _, order := range [][]string{
		{FieldOwner, "kube-controller-manager"},
		{"kube-controller-manager", FieldOwner},
		{FieldOwner, "kubectl", "kube-controller-manager"},
		{"kubectl"},
	} {
		var entries []metav1.ManagedFieldsEntry
		for _, m := range order {
			entries = append(entries, entry(m, `{"f:`+m+`":{}}`))
		}
		out, err := KeepOwnManagedFields(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ManagedFields: entries}})
		g.Expect(err).NotTo(HaveOccurred())
		kept := out.(*appsv1.Deployment).ManagedFields
		want := 0
		if slices.Contains(order, FieldOwner) {
			want = 1
		}
		g.Expect(kept).To(HaveLen(want), "%v", order)
		for _, f := range kept[:cap(kept)] {
			g.Expect(f.Manager).To(Equal(FieldOwner), "%v: a dropped entry is still held by the kept slice", order)
		}
	}
}
