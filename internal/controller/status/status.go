package status

import (
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/policy"
)

// Observation is what one pass saw and did, the whole input of Compute.
type Observation struct {
	// Spec is the resolved spec the pass built from.
	Spec *cachev1alpha1.MemcachedSpec
	// Deployment is the Deployment as the API server last returned it; nil
	// when the pass did not observe it (invalid spec, conflict, failure).
	Deployment *appsv1.Deployment
	// StatefulSet is the same for a fleet whose workload is StatefulSet.
	StatefulSet *appsv1.StatefulSet
	// Restarting counts the pods of a fleet with warm restarts changed in
	// place (image or command line) whose memcached has not restarted yet.
	Restarting int
	// RolloutWait says why the rollout of a fleet with warm restarts
	// takes no step now, if it does not.
	RolloutWait string
	// Servers are the host:port addresses of the ready pods of a
	// StatefulSet fleet; only used when NodesObserved.
	Servers []string
	// Nodes are the ready pods; only used when NodesObserved.
	Nodes         []string
	NodesObserved bool
	// Invalid are the rules the spec breaks.
	Invalid field.ErrorList
	// Errors are the phases' errors.
	Errors []error
	// Auth is what the fleet's pods say of its auth Secret; nil when the
	// fleet has no spec.auth or its pods were not observed.
	Auth *AuthObservation
	// Certificate is what the Certificate phase found; nil when the fleet
	// has no TLS and had none, or the phase did not run.
	Certificate *CertificateObservation
	// Monitoring is what the ServiceMonitor phase found; nil when it had
	// nothing to do or did not run.
	Monitoring *MonitoringObservation
	// Unschedulable counts the fleet's pods the scheduler found no node
	// for, and UnschedulableMessage is the scheduler's word on one of them.
	Unschedulable        int
	UnschedulableMessage string
}

// AuthObservation is what the fleet's pods say of the Secret spec.auth
// names: Blocked pods the kubelet cannot start for want of it (Message is
// its word on one of them), and whether a pod started with it (Mounted).
type AuthObservation struct {
	Blocked int
	Message string
	Mounted bool
}

// CertificateObservation is what the Certificate phase found: whether
// cert-manager's API is served, whether the Certificate is Ready and what
// its Ready condition says.
type CertificateObservation struct {
	// Wanted: the spec enables TLS.
	Wanted     bool
	APIMissing bool
	Ready      bool
	Message    string
	// Removed: TLS is off and the fleet has no Certificate (any more).
	Removed bool
}

// Compute derives the status of mc from one pass's observation. What
// the pass did not observe keeps its last known value (a failing phase never
// zeroes replicas or nodes, which autoscalers and clients read). Conditions
// only change their lastTransitionTime when their status flips, so an
// unchanged fleet yields an identical status and no write.
//
// Available follows the Deployment's meaning: at least size pods available,
// old ones included while a rollout replaces them, since they still serve.
// Ready (kstatus) is stricter: the Deployment has observed the spec the
// operator applied this pass, every pod runs it, and nothing is degraded.
// Reconciling and Stalled complete the kstatus set.
func Compute(mc *cachev1alpha1.Memcached, o Observation) {
	st := &mc.Status
	gen := mc.Generation
	meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionPaused)
	size := ptr.Deref(o.Spec.Size, 0)
	wasScalingUp := scalingUpFrom(st, size)
	st.Selector = desired.SelectorString(mc.Name)
	st.ObservedGeneration = gen
	if o.NodesObserved {
		st.Nodes, st.Servers = nil, nil
		if len(o.Nodes) > 0 {
			st.Nodes = slices.Clone(o.Nodes)
		}
		if len(o.Servers) > 0 {
			st.Servers = slices.Clone(o.Servers)
		}
	}
	var wl *workload
	switch {
	case o.Deployment != nil:
		wl = fromDeployment(o.Deployment)
	case o.StatefulSet != nil:
		wl = fromStatefulSet(o.StatefulSet)
	}
	valid := len(o.Invalid) == 0
	if valid {
		st.Effective = &cachev1alpha1.EffectiveSettings{
			Image:         ptr.Deref(o.Spec.Image, ""),
			MemoryLimitMB: ptr.Deref(o.Spec.MemoryLimitMB, 0),
			Threads:       ptr.Deref(o.Spec.Threads, 0),
			Args:          desired.Args(o.Spec),
		}
	}
	set := func(t string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}
	f := Classify(o.Errors)

	// Degraded, and the kstatus Stalled: the fleet cannot reach its spec.
	degradedReason, degradedMsg := "", ""
	switch {
	case !valid:
		degradedReason, degradedMsg = cachev1alpha1.ReasonInvalidSpec, "the spec breaks a rule, so nothing is built until it is fixed: "+o.Invalid.ToAggregate().Error()
	case len(o.Errors) > 0:
		degradedReason, degradedMsg = f.Reason, errors.Join(o.Errors...).Error()
	case o.Auth != nil && o.Auth.Blocked > 0:
		degradedReason, degradedMsg = cachev1alpha1.ReasonAuthSecretMissing, authMissingMessage(o.Spec, o.Auth)
	case wl != nil && wl.stuck != "":
		degradedReason, degradedMsg = cachev1alpha1.ReasonRolloutStuck, wl.stuck
	}
	// A missing auth Secret waits for the user, like a stuck rollout.
	stalled := !valid || f.Stalled || degradedReason == cachev1alpha1.ReasonRolloutStuck || degradedReason == cachev1alpha1.ReasonAuthSecretMissing

	// A TLS fleet is neither Available nor Ready until its certificate is:
	// until then the Deployment is left as it is, and pods without a valid
	// certificate serve nobody who verifies it.
	certPending := false
	switch c := o.Certificate; {
	case !policy.TLSEnabled(o.Spec):
		// The condition stays until the Certificate is gone: it is how the
		// next pass knows there may be one to delete.
		if c != nil && c.Removed {
			meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionCertificateReady)
		}
	case c == nil:
		// Not observed this pass: keep what was last known.
		if cc := meta.FindStatusCondition(st.Conditions, cachev1alpha1.ConditionCertificateReady); cc != nil && cc.Status != metav1.ConditionTrue {
			certPending = true
		}
	case c.APIMissing:
		certPending = true
		set(cachev1alpha1.ConditionCertificateReady, false, cachev1alpha1.ReasonCertificateAPIMissing, certAPIMissingMessage)
	case c.Ready:
		set(cachev1alpha1.ConditionCertificateReady, true, cachev1alpha1.ReasonCertificateIssued, "Secret "+desired.TLSSecretName(mc.Name)+" holds a valid certificate: "+c.Message)
	default:
		certPending = true
		set(cachev1alpha1.ConditionCertificateReady, false, cachev1alpha1.ReasonCertificateNotReady, c.Message+"; until it is Ready the Deployment is left as it is")
	}
	// Available and Progressing, from the Deployment when it was observed.
	// While the certificate is pending they say so, set once below: set
	// twice in one pass they would flip and move lastTransitionTime.
	setRollout := func(t string, ok bool, reason, msg string) {
		if !certPending {
			set(t, ok, reason, msg)
		}
	}
	rolledOut := false
	progressMsg := "the operator has not observed the fleet's " + workloadKind(o.Spec) + " yet"
	progressReason := cachev1alpha1.ReasonRollingOut
	if ds := wl; ds != nil {
		st.Replicas, st.ReadyReplicas = ds.replicas, ds.ready
		current := ds.current() && ds.desired == size
		rolledOut = current && ds.done() && o.Restarting == 0
		available := fmt.Sprintf("%d of %d pods available", ds.available, size)
		switch {
		case size == 0:
			setRollout(cachev1alpha1.ConditionAvailable, true, cachev1alpha1.ReasonScaledToZero, "size is 0: no pod is desired")
		case rolledOut:
			setRollout(cachev1alpha1.ConditionAvailable, true, cachev1alpha1.ReasonAllReplicasReady, available)
		case ds.available >= size:
			setRollout(cachev1alpha1.ConditionAvailable, true, cachev1alpha1.ReasonReplicasAvailable, available+"; a rollout is under way")
		case wasScalingUp(ds.ready):
			setRollout(cachev1alpha1.ConditionAvailable, false, cachev1alpha1.ReasonScalingUp, available+"; scaling up, and no ready pod was lost")
		default:
			setRollout(cachev1alpha1.ConditionAvailable, false, cachev1alpha1.ReasonReplicasNotReady, available)
		}
		if current {
			progressMsg = fmt.Sprintf("%d of %d pods run the current spec, %d pods in all, %d available", ds.updated, size, ds.replicas, ds.available)
			if o.Restarting > 0 {
				progressMsg += fmt.Sprintf("; %d restarting memcached in place", o.Restarting)
			}
			if o.RolloutWait != "" && !rolledOut {
				progressMsg += "; " + o.RolloutWait
			}
		} else {
			progressMsg = "the " + ds.kind + " has not yet observed the spec applied to it"
		}
		if !rolledOut && o.Unschedulable > 0 {
			progressReason = cachev1alpha1.ReasonPodsUnschedulable
			progressMsg = fmt.Sprintf("%s; %d pod(s) fit on no node: %s", progressMsg, o.Unschedulable, o.UnschedulableMessage)
		}
		if rolledOut {
			setRollout(cachev1alpha1.ConditionProgressing, false, cachev1alpha1.ReasonRolloutComplete, "every pod runs the current spec")
		} else {
			setRollout(cachev1alpha1.ConditionProgressing, true, progressReason, progressMsg)
		}
	} else {
		// Not observed: keep what was last known, or say why there is nothing yet.
		why := degradedReason
		if why == "" {
			why = cachev1alpha1.ReasonReplicasNotReady
		}
		for _, t := range []string{cachev1alpha1.ConditionAvailable, cachev1alpha1.ConditionProgressing} {
			if meta.FindStatusCondition(st.Conditions, t) == nil {
				setRollout(t, false, why, progressMsg)
			}
		}
	}

	if certPending {
		cc := meta.FindStatusCondition(st.Conditions, cachev1alpha1.ConditionCertificateReady)
		set(cachev1alpha1.ConditionAvailable, false, cc.Reason, "the fleet's Certificate is not Ready: "+cc.Message)
		rolledOut = false
		progressReason, progressMsg = cc.Reason, "waiting for the fleet's Certificate: "+cc.Message
		set(cachev1alpha1.ConditionProgressing, true, progressReason, progressMsg)
	}

	switch m := o.Monitoring; {
	case m == nil:
	case m.APIMissing && m.Wanted:
		set(cachev1alpha1.ConditionServiceMonitorReady, false, cachev1alpha1.ReasonServiceMonitorAPIMissing,
			"the cluster does not serve monitoring.coreos.com/v1 ServiceMonitor: install prometheus-operator's CRDs and the operator creates it")
	case m.Applied:
		set(cachev1alpha1.ConditionServiceMonitorReady, true, cachev1alpha1.ReasonServiceMonitorApplied, "the fleet's ServiceMonitor matches the spec")
	case m.Removed || !m.Wanted:
		meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionServiceMonitorReady)
	}

	switch a := o.Auth; {
	case o.Spec.Auth == nil:
		meta.RemoveStatusCondition(&st.Conditions, cachev1alpha1.ConditionAuthReady)
	case a == nil:
		// Not observed this pass: keep what was last known.
	case a.Blocked > 0:
		set(cachev1alpha1.ConditionAuthReady, false, cachev1alpha1.ReasonAuthSecretMissing, authMissingMessage(o.Spec, a))
	case a.Mounted:
		set(cachev1alpha1.ConditionAuthReady, true, cachev1alpha1.ReasonAuthSecretFound,
			fmt.Sprintf("the fleet's pods started with the auth file of Secret %s", o.Spec.Auth.SecretRef.Name))
	default:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: cachev1alpha1.ConditionAuthReady, Status: metav1.ConditionUnknown,
			Reason: cachev1alpha1.ReasonAuthSecretPending, ObservedGeneration: gen,
			Message: fmt.Sprintf("no pod of the fleet has started yet, so whether Secret %s holds key %s is not known", o.Spec.Auth.SecretRef.Name, ptr.Deref(o.Spec.Auth.SecretRef.Key, policy.DefaultAuthSecretKey))})
	}

	if degradedReason != "" {
		set(cachev1alpha1.ConditionDegraded, true, degradedReason, degradedMsg)
	} else {
		set(cachev1alpha1.ConditionDegraded, false, cachev1alpha1.ReasonReconciled, "every owned object matches the spec")
	}
	if stalled {
		set(cachev1alpha1.ConditionStalled, true, degradedReason, degradedMsg)
	} else {
		set(cachev1alpha1.ConditionStalled, false, cachev1alpha1.ReasonReconciled, "the operator can make progress")
	}

	ready := rolledOut && degradedReason == ""
	switch {
	case ready && size == 0:
		set(cachev1alpha1.ConditionReady, true, cachev1alpha1.ReasonScaledToZero, "size is 0 and no pod runs")
	case ready:
		set(cachev1alpha1.ConditionReady, true, cachev1alpha1.ReasonAllReplicasReady, fmt.Sprintf("%d pods run the current spec and are available", size))
	case degradedReason != "":
		set(cachev1alpha1.ConditionReady, false, degradedReason, degradedMsg)
	default:
		set(cachev1alpha1.ConditionReady, false, progressReason, progressMsg)
	}
	if ready || stalled {
		set(cachev1alpha1.ConditionReconciling, false, meta.FindStatusCondition(st.Conditions, cachev1alpha1.ConditionReady).Reason, "nothing left to do until something changes")
	} else {
		reason := progressReason
		msg := progressMsg
		if f.Transient {
			reason, msg = f.Reason, degradedMsg
		}
		set(cachev1alpha1.ConditionReconciling, true, reason, msg)
	}
}

// scalingUpFrom reads, in the status a pass starts from, whether a fleet
// short of desired pods is only scaling up: it is new (no Available yet: it
// grows from nothing), or it was Available with fewer pods than desired (or
// already scaling up), and keeps at least as many ready pods as it had. A pod
// lost on the way ends it. The returned function takes the ready pods the
// pass observed; it must be called before they overwrite the status.
func scalingUpFrom(st *cachev1alpha1.MemcachedStatus, desired int32) func(ready int32) bool {
	var prev *metav1.Condition
	if c := meta.FindStatusCondition(st.Conditions, cachev1alpha1.ConditionAvailable); c != nil {
		prev = c.DeepCopy()
	}
	replicas, readyBefore := st.Replicas, st.ReadyReplicas
	return func(ready int32) bool {
		switch {
		case ready < readyBefore:
			return false
		case prev == nil:
			return true
		case prev.Status == metav1.ConditionTrue:
			return desired > replicas
		}
		return prev.Reason == cachev1alpha1.ReasonScalingUp
	}
}

func deploymentCondition(ds appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range ds.Conditions {
		if ds.Conditions[i].Type == t {
			return &ds.Conditions[i]
		}
	}
	return nil
}

// MonitoringObservation is what the ServiceMonitor phase found: whether
// the spec wants one, and whether it was applied, its API is missing, or
// the fleet has none (any more).
type MonitoringObservation struct {
	Wanted, Applied, APIMissing, Removed bool
}

// workloadKind names the kind of workload a resolved spec asks for.
func workloadKind(spec *cachev1alpha1.MemcachedSpec) string {
	return string(ptr.Deref(spec.Workload, cachev1alpha1.WorkloadDeployment))
}

// PausedMessage is the Paused condition's message.
const PausedMessage = "the Memcached carries " + cachev1alpha1.PausedAnnotation + ": \"true\": the operator leaves the fleet's objects alone, and the rest of this status as it was, until the annotation is removed"

// Pause is the status of a paused fleet: what the last pass before the pause
// wrote, and the Paused condition. observedGeneration stays where it was, so
// a spec changed while paused reads as not yet acted on.
func Pause(mc *cachev1alpha1.Memcached) {
	meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
		Type: cachev1alpha1.ConditionPaused, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonPaused,
		Message: PausedMessage, ObservedGeneration: mc.Generation,
	})
}
