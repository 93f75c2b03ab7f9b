package memcached

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/status"
)

// CacheOptions scopes the manager's cache to the watched namespaces (all when
// empty) and, for owned kinds and EndpointSlices, to the operator's own
// objects (a Service's slices carry its labels), so that its memory follows
// the number of fleets rather than the size of the cluster. Slices keep
// only which pods are ready (readinessOnly), pods only where they run
// (placementOnly). Owned objects keep, in place of their managed fields,
// the digest of what the operator applied (apply.KeepApplied), and of the
// rest what a pass reads: a Deployment its replicas and rollout status, a
// budget the disruptions it allows, a Service or NetworkPolicy only its
// metadata. A StatefulSet keeps its template, which a warm rollout
// compares its pods with.
func CacheOptions(namespaces []string) cache.Options {
	selector := labels.SelectorFromSet(labels.Set{desired.LabelManagedBy: desired.ManagedByValue})
	own := func(transform func(any) (any, error)) cache.ByObject {
		return cache.ByObject{Label: selector, Transform: transform}
	}
	opts := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:            own(apply.KeepApplied("Deployment", appsv1ac.ExtractDeployment, deploymentReads)),
		&appsv1.StatefulSet{}:           own(apply.KeepApplied("StatefulSet", appsv1ac.ExtractStatefulSet, statefulSetReads)),
		&corev1.Service{}:               own(apply.KeepApplied("Service", corev1ac.ExtractService, serviceReads)),
		&policyv1.PodDisruptionBudget{}: own(apply.KeepApplied("PodDisruptionBudget", policyv1ac.ExtractPodDisruptionBudget, budgetReads)),
		&networkingv1.NetworkPolicy{}:   own(apply.KeepApplied("NetworkPolicy", networkingv1ac.ExtractNetworkPolicy, networkPolicyReads)),
		&discoveryv1.EndpointSlice{}:    {Label: selector, Transform: readinessOnly},
		&corev1.Pod{}:                   {Label: selector, Transform: placementOnly},
		&cachev1alpha1.Memcached{}:      {Transform: memcachedReads},
	}}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// memcachedReads is the cache transform of Memcached objects: no managed
// fields (status is patched as a merge patch computed from the object read,
// which needs none) and shared strings.
func memcachedReads(in any) (any, error) {
	m, ok := in.(*cachev1alpha1.Memcached)
	if !ok {
		return in, nil
	}
	m.ManagedFields = nil
	shareMeta(&m.ObjectMeta)
	for i := range m.Status.Conditions {
		c := &m.Status.Conditions[i]
		c.Type, c.Reason = share(c.Type), share(c.Reason)
	}
	return m, nil
}

// deploymentReads trims a cached Deployment to what a pass reads: its
// replicas, for --max-size and scale-down, and its rollout status.
func deploymentReads(d *appsv1.Deployment) {
	shareMeta(&d.ObjectMeta)
	d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas}
	var kept []appsv1.DeploymentCondition
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			kept = append(kept, c)
		}
	}
	d.Status.Conditions = kept
}

// serviceReads trims a cached Service to its metadata: a pass reads only
// whom it belongs to.
func serviceReads(s *corev1.Service) {
	shareMeta(&s.ObjectMeta)
	s.Spec, s.Status = corev1.ServiceSpec{}, corev1.ServiceStatus{}
}

// budgetReads trims a cached PodDisruptionBudget to the disruptions it
// allows, which a warm rollout waits for.
func budgetReads(b *policyv1.PodDisruptionBudget) {
	shareMeta(&b.ObjectMeta)
	b.Spec = policyv1.PodDisruptionBudgetSpec{}
	b.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: b.Status.DisruptionsAllowed}
}

// statefulSetReads keeps a cached StatefulSet whole (a warm rollout
// compares its pods with its template), with shared strings.
func statefulSetReads(s *appsv1.StatefulSet) { shareMeta(&s.ObjectMeta) }

// networkPolicyReads trims a cached NetworkPolicy to its metadata.
func networkPolicyReads(n *networkingv1.NetworkPolicy) {
	shareMeta(&n.ObjectMeta)
	n.Spec = networkingv1.NetworkPolicySpec{}
}

// readinessOnly is the cache transform of EndpointSlices: what ReadyPods
// reads (each endpoint's pod and its ready and terminating conditions) and
// the labels that map and index a slice to its fleet. Addresses, ports,
// nodes, hints and the rest of the metadata are dropped, since the cache
// holds a slice per fleet (two for dual stack).
func readinessOnly(in any) (any, error) {
	s, ok := in.(*discoveryv1.EndpointSlice)
	if !ok {
		return in, nil
	}
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  cachedMeta(&s.ObjectMeta),
		AddressType: s.AddressType,
		Endpoints:   make([]discoveryv1.Endpoint, 0, len(s.Endpoints)),
	}
	for _, ep := range s.Endpoints {
		kept := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready, Terminating: ep.Conditions.Terminating}}
		if ep.TargetRef != nil {
			kept.TargetRef = &corev1.ObjectReference{Kind: ep.TargetRef.Kind, Name: ep.TargetRef.Name}
		}
		out.Endpoints = append(out.Endpoints, kept)
	}
	return out, nil
}

// placementOnly keeps of a cached pod only what observePods, markScaleDown,
// rollWarm and the event handler read: a fleet of a thousand pods then costs little
// memory.
func placementOnly(in any) (any, error) {
	p, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	out := &corev1.Pod{ObjectMeta: cachedMeta(&p.ObjectMeta), Spec: corev1.PodSpec{NodeName: p.Spec.NodeName}}
	if cost, ok := p.Annotations[desired.PodDeletionCost]; ok {
		out.Annotations = map[string]string{desired.PodDeletionCost: cost}
	}
	if c := status.UnschedulableCondition(p); c != nil {
		out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message}}
	}
	if status.PodReady(p) {
		out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	}
	if tpl, ok := p.Annotations[desired.TemplateAnnotation]; ok {
		// A pod of a fleet with warm restarts: what its rollout reads
		// (desired.NextWarmStep).
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[desired.TemplateAnnotation] = tpl
		for _, k := range []string{desired.ArgsAnnotation, desired.RestartsAnnotation} {
			if v, ok := p.Annotations[k]; ok {
				out.Annotations[k] = v
			}
		}
		for _, c := range p.Spec.Containers {
			if c.Name == desired.MemcachedContainer {
				out.Spec.Containers = []corev1.Container{{Name: c.Name, Image: c.Image, Resources: c.Resources}}
			}
		}
		for _, v := range p.Spec.Volumes {
			if v.Name == desired.MemoryVolumeName {
				out.Spec.Volumes = []corev1.Volume{v}
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == desired.MemcachedContainer {
				out.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Ready: c.Ready, RestartCount: c.RestartCount, Resources: c.Resources}}
			}
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
				out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
			}
		}
	}
	if c := status.AuthCheckStatus(p); c != nil && status.AuthBlocked(p) != "" {
		kept := corev1.ContainerStatus{Name: c.Name, State: c.State}
		if t := c.LastTerminationState.Terminated; t != nil {
			kept.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Message: t.Message}
		}
		out.Status.InitContainerStatuses = []corev1.ContainerStatus{kept}
	}
	return out, nil
}

// cachedMeta is the metadata a trimmed cache keeps: the object's identity,
// its labels (which index and map it to a fleet) and its lifetime.
func cachedMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Labels: m.Labels, DeletionTimestamp: m.DeletionTimestamp, CreationTimestamp: m.CreationTimestamp,
	}
	shareMeta(&out)
	return out
}

// shared holds one copy of strings that nearly every cached object repeats:
// the label keys and values the operator and the API server's controllers
// put on a fleet's objects, an owner's API version and kind, common annotation keys, and a
// fleet's condition types and reasons. Each decoded object brings a copy of
// its own; the cache keeps this one instead. The set is fixed, so what
// tenants write cannot grow it.
var shared = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{
		desired.LabelName, desired.LabelInstance, desired.LabelManagedBy, desired.NameValue, desired.ManagedByValue,
		appsv1.DefaultDeploymentUniqueLabelKey, appsv1.ControllerRevisionHashLabelKey,
		appsv1.StatefulSetPodNameLabel, appsv1.PodIndexLabel,
		corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.IsHeadlessService,
		discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy, "endpointslice-controller.k8s.io",
		"deployment.kubernetes.io/revision",
		cachev1alpha1.GroupVersion.String(), "Memcached", "apps/v1", "v1",
		cachev1alpha1.ConditionReady, cachev1alpha1.ConditionAvailable, cachev1alpha1.ConditionProgressing,
		cachev1alpha1.ConditionDegraded, cachev1alpha1.ConditionReconciling, cachev1alpha1.ConditionStalled,
		cachev1alpha1.ReasonAllReplicasReady, cachev1alpha1.ReasonReplicasAvailable, cachev1alpha1.ReasonReplicasNotReady,
		cachev1alpha1.ReasonScalingUp, cachev1alpha1.ReasonRollingOut, cachev1alpha1.ReasonRolloutComplete,
		cachev1alpha1.ReasonReconciled,
	} {
		m[s] = s
	}
	return m
}()

// share returns the shared copy of s, or s when there is none.
func share(s string) string {
	if c, ok := shared[s]; ok {
		return c
	}
	return s
}

// shareMeta puts the shared copies in m's labels, annotation keys and owner
// references, in place.
func shareMeta(m *metav1.ObjectMeta) {
	shareKeys(m.Labels, true)
	shareKeys(m.Annotations, false)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = share(r.APIVersion), share(r.Kind)
	}
}

// shareKeys puts shared keys (and values, when values is set) in m. Setting
// a key a map has stores the key given too (Go does so for string keys), so
// no entry is deleted and the map's memory is reused.
func shareKeys(m map[string]string, values bool) {
	for k, v := range m {
		if values {
			v = share(v)
		}
		m[share(k)] = v
	}
}
