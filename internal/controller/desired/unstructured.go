package desired

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// ownedUnstructured is the skeleton both optional kinds are built on: the
// fleet's name, namespace, labels and controller reference.
func ownedUnstructured(mc *cachev1alpha1.Memcached, gvk schema.GroupVersionKind, labels map[string]any, spec map[string]any) *unstructured.Unstructured {
	owner, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&metav1.OwnerReference{
		APIVersion: cachev1alpha1.GroupVersion.String(), Kind: "Memcached", Name: mc.Name, UID: mc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})
	if err != nil {
		panic(fmt.Sprintf("converting an owner reference: %v", err))
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name": mc.Name, "namespace": mc.Namespace, "labels": labels, "ownerReferences": []any{owner},
		},
		"spec": spec,
	}}
	u.SetGroupVersionKind(gvk)
	return u
}
