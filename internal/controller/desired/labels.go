package desired

import (
	"maps"

	"k8s.io/apimachinery/pkg/labels"
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

// PodLabels puts the user's labels (podLabels, or the Service's) under the
// operator's own, which win.
func PodLabels(instance string, extra map[string]string) map[string]string {
	l := maps.Clone(extra)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, objectLabels(instance))
	return l
}

// SelectorString is the string form of a fleet's pod selector, as the scale
// subresource reports it.
func SelectorString(instance string) string {
	return labels.SelectorFromSet(selectorLabels(instance)).String()
}
