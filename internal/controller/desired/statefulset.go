package desired

import (
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// StatefulSet is the StatefulSet that runs a fleet whose workload is
// StatefulSet, from a defaulted spec: the same pods as the Deployment's, named
// <name>-<i> and governed by the headless Service, which gives each its own
// DNS name. Pods start and stop in parallel: a cache's pods do not depend on
// each other, so neither a scale nor a replacement waits for a lower ordinal.
// A rolling update still replaces one pod at a time, highest ordinal first,
// each after the one before is ready.
//
// With warm restarts the operator rolls the pods itself (OnDelete): it
// changes an image in place, where the pod keeps its memory file, and
// replaces a pod only for other changes.
func StatefulSet(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *appsv1ac.StatefulSetApplyConfiguration {
	strategy := appsv1.RollingUpdateStatefulSetStrategyType
	if policy.WarmRestartEnabled(spec) {
		strategy = appsv1.OnDeleteStatefulSetStrategyType
	}
	return appsv1ac.StatefulSet(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc.Name)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(appsv1ac.StatefulSetSpec().
			WithReplicas(*spec.Size).
			WithServiceName(mc.Name).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc.Name))).
			WithPodManagementPolicy(appsv1.ParallelPodManagement).
			WithMinReadySeconds(minReadySeconds).
			WithRevisionHistoryLimit(revisionHistory).
			WithUpdateStrategy(appsv1ac.StatefulSetUpdateStrategy().
				WithType(strategy)).
			WithTemplate(podTemplate(mc.Name, spec)))
}

// Servers are the host:port addresses of the ready pods of a StatefulSet
// fleet, in ordinal order: each pod's DNS name under the headless Service.
// Pods whose names are not the StatefulSet's are left out.
func Servers(mc *cachev1alpha1.Memcached, port int32, readyPods []string) []string {
	type server struct {
		ordinal int
		addr    string
	}
	var out []server
	for _, p := range readyPods {
		i, ok := Ordinal(mc.Name, p)
		if !ok {
			continue
		}
		out = append(out, server{i, p + "." + mc.Name + "." + mc.Namespace + ".svc:" + strconv.Itoa(int(port))})
	}
	slices.SortFunc(out, func(a, b server) int { return a.ordinal - b.ordinal })
	addrs := make([]string, len(out))
	for i, s := range out {
		addrs[i] = s.addr
	}
	return addrs
}
