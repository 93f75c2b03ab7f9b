package memcached

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// Labels on every object the operator creates. The operator's cache only
// holds objects with LabelManagedBy, so removing it hides an object until the
// next apply puts it back.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	NameValue      = "memcached"
	ManagedByValue = "memcached-operator"
)

// selectorLabels select one fleet's pods; they never change over its lifetime.
func selectorLabels(instance string) map[string]string {
	return map[string]string{LabelName: NameValue, LabelInstance: instance}
}

// objectLabels are selectorLabels plus the managed-by label the cache filters on.
func objectLabels(instance string) map[string]string {
	l := selectorLabels(instance)
	l[LabelManagedBy] = ManagedByValue
	return l
}

// podLabels puts the user's podLabels under the operator's own, which win.
func podLabels(instance string, extra map[string]string) map[string]string {
	l := maps.Clone(extra)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, objectLabels(instance))
	return l
}

// keepOwnManagedFields drops the managed fields of every other manager
// (the Deployment controller's status entries are the largest part of a
// cached Deployment): comparing what the operator applied needs only its
// own entry. The kept entries go into a slice of their own: filtered in
// place, the decoded slice's tail would still hold the dropped entries, and
// the cache would keep their fields alive.
func keepOwnManagedFields(in any) (any, error) {
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

// SelectorString is the string form of a fleet's pod selector, as the scale
// subresource reports it.
func SelectorString(instance string) string {
	return labels.SelectorFromSet(selectorLabels(instance)).String()
}

// CacheOptions scopes the manager's cache to the watched namespaces (all when
// empty) and, for owned kinds and EndpointSlices, to the operator's own
// objects (a Service's slices carry its labels), so that its memory follows
// the number of fleets rather than the size of the cluster. Slices keep
// only which pods are ready (readinessOnly), pods only where they run
// (placementOnly): only owned objects keep managed fields, to compare what
// the operator applied.
func CacheOptions(namespaces []string) cache.Options {
	selector := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue})
	own := cache.ByObject{Label: selector, Transform: keepOwnManagedFields}
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:            own,
		&corev1.Service{}:               own,
		&policyv1.PodDisruptionBudget{}: own,
		&networkingv1.NetworkPolicy{}:   own,
		&discoveryv1.EndpointSlice{}:    {Label: selector, Transform: readinessOnly},
		&corev1.Pod{}:                   {Label: selector, Transform: placementOnly},
		// Status is patched as a merge patch computed from the object read,
		// which needs no managed fields.
		&cachev1alpha1.Memcached{}: {Transform: cache.TransformStripManagedFields()},
	}}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}
