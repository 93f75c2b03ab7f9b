package memcached

import (
	"context"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/status"
)

// scope is what one pass knows: the object as read, the object being
// updated, and what the phases observed on the way.
type scope struct {
	original  *cachev1alpha1.Memcached
	memcached *cachev1alpha1.Memcached
	// spec is memcached.Spec resolved (defaults and derived values filled
	// in); builders read only this.
	spec *cachev1alpha1.MemcachedSpec
	// invalid holds the rules the spec breaks; nothing is built then.
	invalid field.ErrorList
	// kept holds the rules it breaks as it did when it was last built,
	// which do not stop it being built (acceptedRules).
	kept field.ErrorList
	// current is the Deployment as the cache held it when the pass began;
	// nil when there was none.
	current *appsv1.Deployment
	// deployment is the Deployment as the API server last returned it this
	// pass; nil when the pass did not observe it.
	deployment *appsv1.Deployment
	// currentSet and statefulSet are the same for a fleet whose workload is
	// StatefulSet.
	currentSet, statefulSet *appsv1.StatefulSet
	// servers are the ready pods' host:port addresses of a StatefulSet fleet.
	servers []string
	// restarting counts the pods of a warm fleet changed in place whose
	// memcached has not restarted with the change yet.
	restarting int
	// rolloutWait says why the rollout of a warm fleet waits, if it does.
	rolloutWait string
	// nodes are the ready pods; nodesObserved is false when listing failed.
	nodes         []string
	nodesObserved bool
	// unschedulable counts the pods no node fits, with the scheduler's
	// message for one of them.
	unschedulable    int
	unschedulableMsg string
	// auth is what the fleet's pods say of its auth Secret; nil when the
	// fleet has no spec.auth or its pods were not observed.
	auth *status.AuthObservation
	// tls is what the Certificate phase found; nil when the fleet neither
	// enables TLS nor had a Certificate.
	tls *status.CertificateObservation
	// monitoring is what the ServiceMonitor phase found; nil when the fleet
	// neither asks for a ServiceMonitor nor had one.
	monitoring *status.MonitoringObservation
	// created holds the kinds this pass created (kind → true); the owned
	// object phases run at once and share it.
	createdMu sync.Mutex
	created   map[string]bool
}

func (s *scope) markCreated(kind string) {
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	if s.created == nil {
		s.created = map[string]bool{}
	}
	s.created[kind] = true
}

type phase func(ctx context.Context, s *scope) error

// ownedPhases each write one owned kind and read nothing another writes
// (the Deployment phase also marks pods for a scale-down), so a pass runs them at once:
// a new fleet's objects then cost the time of the slowest one's requests
// rather than the sum of all of them, which is most of how long a worker
// spends on a fleet when the API server is busy.
var ownedPhases = []struct {
	name string
	run  func(r *Reconciler) phase
}{
	{"workload", func(r *Reconciler) phase { return r.reconcileWorkload }},
	{"service", func(r *Reconciler) phase { return r.reconcileService }},
	{"poddisruptionbudget", func(r *Reconciler) phase { return r.reconcilePodDisruptionBudget }},
	{"servicemonitor", func(r *Reconciler) phase { return r.reconcileServiceMonitor }},
	{"networkpolicy", func(r *Reconciler) phase { return r.reconcileNetworkPolicy }},
}

// createdKinds lists what a pass created in the order the objects are
// described everywhere else.
func (s *scope) createdKinds() []string {
	var kinds []string
	for _, k := range []string{"Deployment", "StatefulSet", "Service", "PodDisruptionBudget", "ServiceMonitor", "NetworkPolicy", "Certificate"} {
		if s.created[k] {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// settled is the part of the pass's observation that is known before the
// owned objects' phases run (the spec, its rules and the Certificate), so it
// can be read while they run.
func (s *scope) settled() status.Observation {
	o := status.Observation{Spec: s.spec, Invalid: s.invalid}
	o.Certificate = s.tls
	return o
}

// stable tells whether the fleet's workload is a StatefulSet.
func (s *scope) stable() bool {
	return ptr.Deref(s.spec.Workload, cachev1alpha1.WorkloadDeployment) == cachev1alpha1.WorkloadStatefulSet
}

// currentWorkload is the fleet's Deployment or StatefulSet as the pass
// began, nil when it had none.
func (s *scope) currentWorkload() (annotations map[string]string, replicas int32, ok bool) {
	switch {
	case s.current != nil:
		return s.current.Annotations, ptr.Deref(s.current.Spec.Replicas, 1), true
	case s.currentSet != nil:
		return s.currentSet.Annotations, ptr.Deref(s.currentSet.Spec.Replicas, 1), true
	}
	return nil, 0, false
}
