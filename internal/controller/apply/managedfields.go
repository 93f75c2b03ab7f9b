package apply

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeepOwnManagedFields is a cache transform that drops the managed fields of every other manager
// (the Deployment controller's status entries are the largest part of a
// cached Deployment): comparing what the operator applied needs only its
// own entry. The kept entries go into a slice of their own: filtered in
// place, the decoded slice's tail would still hold the dropped entries, and
// the cache would keep their fields alive.
func KeepOwnManagedFields(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	var kept []metav1.ManagedFieldsEntry
	for _, f := range obj.GetManagedFields() {
		if f.Manager == FieldOwner {
			kept = append(kept, f)
		}
	}
	obj.SetManagedFields(kept)
	return obj, nil
}

// FieldOwner is the server-side apply field manager of every object the
// operator writes; one fixed name lets it take back fields others changed.
const FieldOwner = "memcached-operator"
