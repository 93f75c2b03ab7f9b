package desired

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// A scale-down is where topology spread is lost: the scheduler holds the
// constraints when pods are placed, but the ReplicaSet picks the pods to
// remove by node (the most crowded node first), blind to zones. On three
// nodes in two zones, a fleet of 7 scaled to 3 loses its one-zone node's pods
// first and ends with every pod in one zone. The ReplicaSet does honour
// the pod-deletion-cost annotation before its node ranking, so the operator
// chooses the pods that keep the spread and marks them with the lowest cost.
const (
	// PodDeletionCost is the annotation the ReplicaSet controller ranks a
	// scale-down's ready pods by, lowest first.
	PodDeletionCost = "controller.kubernetes.io/pod-deletion-cost"
	// FirstToGo is the cost of a pod the operator chose to remove: the least
	// there is, below anything a user's podAnnotations could set.
	FirstToGo = "-2147483648"
)

// Placement is a ready pod of the fleet as a scale-down sees it.
type Placement struct {
	Name string
	Node string
	// Domains holds the pod's domain under each spread constraint's
	// topology key, in the spec's order; "" when it is not known.
	Domains []string
	Created time.Time
	// Marked is whether the pod already carries FirstToGo.
	Marked bool
}

// SpreadVictims picks remove pods so that, after they are gone, every
// spread constraint's domains are as even as they can be, the first
// constraint before the second, then the nodes: each pick is a pod of the
// most crowded domain. Among equals it keeps the older pods (their caches
// are warm) and the marks already made (no writes).
func SpreadVictims(pods []Placement, remove int) []string {
	keys := 0
	for _, p := range pods {
		keys = max(keys, len(p.Domains))
	}
	counts := make([]map[string]int, keys)
	for k := range counts {
		counts[k] = map[string]int{}
	}
	perNode := map[string]int{}
	domain := func(p *Placement, k int) string {
		if k < len(p.Domains) {
			return p.Domains[k]
		}
		return ""
	}
	for i := range pods {
		for k := range keys {
			counts[k][domain(&pods[i], k)]++
		}
		perNode[pods[i].Node]++
	}
	// crowdedFirst orders a before b when a should go first.
	crowdedFirst := func(a, b *Placement) int {
		for k := range keys {
			if c := cmp.Compare(counts[k][domain(b, k)], counts[k][domain(a, k)]); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(perNode[b.Node], perNode[a.Node]); c != 0 {
			return c
		}
		if a.Marked != b.Marked {
			if a.Marked {
				return -1
			}
			return 1
		}
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return cmp.Compare(b.Name, a.Name)
	}
	left := slices.Clone(pods)
	var victims []string
	for ; remove > 0 && len(left) > 0; remove-- {
		i := 0
		for j := 1; j < len(left); j++ {
			if crowdedFirst(&left[j], &left[i]) < 0 {
				i = j
			}
		}
		v := left[i]
		victims = append(victims, v.Name)
		for k := range keys {
			counts[k][domain(&v, k)]--
		}
		perNode[v.Node]--
		left = slices.Delete(left, i, i+1)
	}
	slices.Sort(victims)
	return victims
}

// SpreadKeys are the topology keys of the spec's spread constraints.
func SpreadKeys(spec *cachev1alpha1.MemcachedSpec) []string {
	var keys []string
	for _, c := range spec.TopologySpreadConstraints {
		keys = append(keys, c.TopologyKey)
	}
	return keys
}

// DomainOf is a pod's domain under a topology key. The API server copies
// its node's zone and region labels onto a pod when it is bound (the
// PodTopologyLabels admission plugin, on by default since Kubernetes 1.35),
// and a node's hostname label is its name: these are known without reading
// nodes, which keeps the operator's RBAC to its namespaces. Any other key
// is unknown (""), and the pods' nodes decide among them.
func DomainOf(p *corev1.Pod, key string) string {
	if key == hostnameTopology {
		return p.Spec.NodeName
	}
	return p.Labels[key]
}
