package status

import (
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/apply"
	"github.com/example/memcached-operator/internal/controller/fleettest"
	"github.com/example/memcached-operator/internal/policy"
)

// errTest is a failure that gives no condition reason.
var errTest = errors.New("boom")

func TestComputeStatus(t *testing.T) {
	dep := func(replicas, updated, ready, available int32, observed bool) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}}
		d.Status = appsv1.DeploymentStatus{Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available}
		if observed {
			d.Status.ObservedGeneration = 2
		}
		return d
	}
	stuck := dep(3, 1, 3, 3, true)
	stuck.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "too slow"}}
	conflict := apply.NameConflict("Deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache"}})
	type conds map[string]string // type -> "Status/Reason"
	tests := []struct {
		name          string
		dep           *appsv1.Deployment
		invalid       field.ErrorList
		err           error
		unschedulable int
		want          conds
	}{
		{name: "the Deployment was just created again: fewer ready pods than the last pass saw",
			dep: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}},
			want: conds{"Available": "False/ReplicasNotReady", "Progressing": "True/RollingOut", "Ready": "False/RollingOut",
				"Reconciling": "True/RollingOut", "Stalled": "False/Reconciled", "Degraded": "False/Reconciled"}},
		{name: "all ready", dep: dep(3, 3, 3, 3, true),
			want: conds{"Available": "True/AllReplicasReady", "Progressing": "False/RolloutComplete", "Ready": "True/AllReplicasReady",
				"Reconciling": "False/AllReplicasReady", "Stalled": "False/Reconciled", "Degraded": "False/Reconciled"}},
		{name: "a template change the Deployment has not observed yet: pods still serve, but nothing is Ready", dep: dep(3, 3, 3, 3, false),
			want: conds{"Available": "True/ReplicasAvailable", "Progressing": "True/RollingOut", "Ready": "False/RollingOut", "Reconciling": "True/RollingOut"}},
		{name: "rolling out with a surge pod: still Available", dep: dep(4, 1, 4, 4, true),
			want: conds{"Available": "True/ReplicasAvailable", "Progressing": "True/RollingOut", "Ready": "False/RollingOut"}},
		{name: "scaling up: fewer pods available than size", dep: dep(3, 3, 2, 2, true),
			want: conds{"Available": "False/ReplicasNotReady", "Ready": "False/RollingOut"}},
		{name: "a pod that fits on no node: the rollout says why, and is not stalled (a node may come)", dep: dep(3, 3, 2, 2, true), unschedulable: 1,
			want: conds{"Available": "False/ReplicasNotReady", "Progressing": "True/PodsUnschedulable", "Ready": "False/PodsUnschedulable",
				"Reconciling": "True/PodsUnschedulable", "Stalled": "False/Reconciled", "Degraded": "False/Reconciled"}},
		{name: "an unschedulable surplus pod of a rolled-out fleet changes nothing", dep: dep(3, 3, 3, 3, true), unschedulable: 1,
			want: conds{"Progressing": "False/RolloutComplete", "Ready": "True/AllReplicasReady"}},
		{name: "a transient failure is retried: Reconciling, not Stalled", dep: dep(3, 3, 3, 3, true), err: errTest,
			want: conds{"Available": "True/AllReplicasReady", "Degraded": "True/ReconcileFailed", "Ready": "False/ReconcileFailed",
				"Reconciling": "True/ReconcileFailed", "Stalled": "False/Reconciled"}},
		{name: "a name conflict stalls", err: conflict,
			want: conds{"Degraded": "True/NameConflict", "Stalled": "True/NameConflict", "Ready": "False/NameConflict", "Reconciling": "False/NameConflict"}},
		{name: "an invalid spec stalls and builds nothing", invalid: field.ErrorList{field.Invalid(field.NewPath("spec", "extraArgs").Index(0), "-d", "no")},
			want: conds{"Degraded": "True/InvalidSpec", "Stalled": "True/InvalidSpec", "Ready": "False/InvalidSpec"}},
		{name: "a rollout past its deadline stalls", dep: stuck,
			want: conds{"Degraded": "True/ProgressDeadlineExceeded", "Stalled": "True/ProgressDeadlineExceeded", "Ready": "False/ProgressDeadlineExceeded"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) })
			// What an earlier pass saw; a pass that does not observe keeps it.
			mc.Status.Replicas, mc.Status.ReadyReplicas, mc.Status.Nodes = 3, 3, []string{"old"}
			obs := Observation{Spec: spec, Deployment: tt.dep, Nodes: []string{"a", "b", "c"}, NodesObserved: tt.err == nil,
				Invalid: tt.invalid, Unschedulable: tt.unschedulable, UnschedulableMessage: "0/3 nodes are available"}
			if tt.err != nil {
				obs.Errors = []error{tt.err}
			}
			Compute(mc, obs)
			st := mc.Status
			g.Expect(st.ObservedGeneration).To(Equal(int64(3)))
			g.Expect(st.Selector).To(Equal("app.kubernetes.io/instance=cache,app.kubernetes.io/name=memcached"))
			got := conds{}
			for _, c := range st.Conditions {
				got[c.Type] = string(c.Status) + "/" + c.Reason
				g.Expect(c.ObservedGeneration).To(Equal(int64(3)))
			}
			for typ, want := range tt.want {
				g.Expect(got).To(HaveKeyWithValue(typ, want), typ)
			}
			if tt.err == nil {
				g.Expect(st.Nodes).To(Equal([]string{"a", "b", "c"}))
			} else {
				g.Expect(st.Nodes).To(Equal([]string{"old"}), "nodes not observed this pass keep their last value")
			}
			if tt.dep == nil {
				g.Expect(st.Replicas).To(Equal(int32(3)), "replicas not observed this pass keep their last value")
			} else {
				g.Expect(st.Replicas).To(Equal(tt.dep.Status.Replicas))
			}
			if tt.invalid == nil {
				g.Expect(st.Effective).To(Equal(&cachev1alpha1.EffectiveSettings{Image: "memcached:test", MemoryLimitMB: 64, Threads: 4,
					Args: []string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m"}}))
			}

			// A second computation over the same observations changes nothing.
			before := mc.Status.DeepCopy()
			Compute(mc, obs)
			g.Expect(mc.Status).To(Equal(*before))
		})
	}
}

// TestScalingUp: a fleet that grows is short of pods because the user asked
// for more, not because it lost any. Available says so (ScalingUp) until
// the new pods are available, unless a ready pod is lost on the way; a fleet
// that was short already, or shrinks, or loses a pod at its size, is not
// scaling up.
func TestScalingUp(t *testing.T) {
	type step struct {
		size            int32
		replicas, ready int32
		status          metav1.ConditionStatus
		reason          string
		available       int32
	}
	ready := func(size int32) step {
		return step{size, size, size, metav1.ConditionTrue, cachev1alpha1.ReasonAllReplicasReady, size}
	}
	short := func(size, replicas, ready int32, reason string) step {
		return step{size, replicas, ready, metav1.ConditionFalse, reason, ready}
	}
	up, notReady := cachev1alpha1.ReasonScalingUp, cachev1alpha1.ReasonReplicasNotReady
	for name, steps := range map[string][]step{
		"3 to 5, the new pods come one by one": {ready(3), short(5, 3, 3, up), short(5, 5, 3, up), short(5, 5, 4, up), ready(5)},
		"a ready pod lost on the way":          {ready(3), short(5, 5, 4, up), short(5, 5, 3, notReady), short(5, 5, 4, notReady), ready(5)},
		"grown again while growing":            {ready(3), short(5, 5, 4, up), short(7, 5, 4, up), short(7, 7, 6, up), ready(7)},
		"from zero":                            {{0, 0, 0, metav1.ConditionTrue, cachev1alpha1.ReasonScaledToZero, 0}, short(3, 0, 0, up), short(3, 3, 1, up), ready(3)},
		"a pod lost at the same size":          {ready(3), short(3, 3, 2, notReady), ready(3)},
		"grown while short of pods already":    {ready(3), short(3, 3, 2, notReady), short(5, 3, 2, notReady), short(5, 5, 4, notReady)},
		"a new fleet":                          {short(3, 0, 0, up), short(3, 3, 2, up), ready(3)},
		"a new fleet losing a ready pod":       {short(3, 0, 0, up), short(3, 3, 2, up), short(3, 3, 1, notReady), ready(3)},
		// A pod restarted: ready again but not yet available (minReadySeconds).
		"a pod unavailable at the same size, none unready": {ready(3), {3, 3, 3, metav1.ConditionFalse, notReady, 2}, ready(3)},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			mc, _ := fleettest.NewMemcached(nil)
			for i, st := range steps {
				spec := policy.Resolve(&cachev1alpha1.MemcachedSpec{Size: ptr.To(st.size)}, policy.Config{DefaultImage: "memcached:test"})
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(st.size)},
					Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: st.replicas, UpdatedReplicas: st.replicas, ReadyReplicas: st.ready, AvailableReplicas: st.available}}
				Compute(mc, Observation{Spec: spec, Deployment: d})
				c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionAvailable)
				g.Expect(c).To(And(HaveField("Status", st.status), HaveField("Reason", st.reason)), "step %d: %+v", i, st)
				if st.reason == up {
					g.Expect(c.Message).To(Equal(fmt.Sprintf("%d of %d pods available; scaling up, and no ready pod was lost", st.available, st.size)))
				}
			}
		})
	}
}

// authPod is a pod of the fleet as the kubelet reports it: ready, or held
// back with a configuration error (message).
func authPod(name, message string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	if message == "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return p
	}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "auth-check", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: message}}}}
	return p
}

// badFilePod is a pod whose auth check refused the file and waits to run again.
func badFilePod(name, message string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "auth-check",
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: message}}}}
	return p
}

// checkedPod is a pod whose auth check passed, after failing once.
func checkedPod(name string) corev1.Pod {
	p := badFilePod(name, "line 2 is empty")
	p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	return p
}

func TestComputeStatusAuth(t *testing.T) {
	rolledOut := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}}
	// The kubelet's words for a missing Secret and a missing key.
	const notFound, noKey = `secret "users" not found`, `couldn't find key auth in Secret ns/users`
	type conds map[string]string
	tests := []struct {
		name string
		dep  *appsv1.Deployment
		pods []corev1.Pod
		want conds
	}{
		{name: "a pod started with the Secret", dep: rolledOut, pods: []corev1.Pod{authPod("a", "")},
			want: conds{"AuthReady": "True/AuthSecretFound", "Ready": "True/AllReplicasReady"}},
		{name: "no pod started yet: not known", pods: nil,
			want: conds{"AuthReady": "Unknown/AuthSecretPending"}},
		{name: "a new fleet whose Secret is missing: stalled until it is created", pods: []corev1.Pod{authPod("b", notFound), authPod("a", notFound)},
			want: conds{"AuthReady": "False/AuthSecretMissing", "Ready": "False/AuthSecretMissing",
				"Degraded": "True/AuthSecretMissing", "Stalled": "True/AuthSecretMissing", "Reconciling": "False/AuthSecretMissing"}},
		{name: "the Secret lacks the key", pods: []corev1.Pod{authPod("a", noKey)},
			want: conds{"AuthReady": "False/AuthSecretMissing", "Ready": "False/AuthSecretMissing"}},
		{name: "a running fleet whose Secret went, resized: it keeps serving, and says why it is not Ready", dep: rolledOut,
			pods: []corev1.Pod{authPod("a", ""), authPod("b", ""), authPod("c", ""), authPod("d", notFound)},
			want: conds{"AuthReady": "False/AuthSecretMissing", "Available": "True/AllReplicasReady", "Ready": "False/AuthSecretMissing", "Degraded": "True/AuthSecretMissing"}},
		{name: "the auth file is one memcached refuses", pods: []corev1.Pod{badFilePod("a", "line 2 is empty")},
			want: conds{"AuthReady": "False/AuthSecretMissing", "Ready": "False/AuthSecretMissing"}},
		{name: "the check passed: the pod waits for nothing of the Secret", pods: []corev1.Pod{checkedPod("a")},
			want: conds{"AuthReady": "Unknown/AuthSecretPending"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
				s.Size = ptr.To[int32](3)
				s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}}
			})
			obs := Observation{Spec: spec, Deployment: tt.dep, Auth: AuthFromPods(tt.pods)}
			Compute(mc, obs)
			expectConditions(g, mc.Status.Conditions, tt.want)
			c := meta.FindStatusCondition(mc.Status.Conditions, "AuthReady")
			g.Expect(c.Message).To(ContainSubstring("users"), "the message names the Secret")
			if c.Reason == "AuthSecretMissing" {
				g.Expect(c.Message).To(MatchRegexp(`in [a-d]: (secret|couldn.t|the auth file: line)`), "and the first pod held back, by name, with the kubelet's or the check's word")
			}
			before := mc.Status.DeepCopy()
			Compute(mc, obs)
			g.Expect(mc.Status).To(Equal(*before))

			// Turning auth off removes the condition.
			_, plain := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) })
			Compute(mc, Observation{Spec: plain, Deployment: rolledOut})
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "AuthReady")).To(BeNil())
		})
	}
}

// TestCertificateReady reads cert-manager's Ready condition, and only for
// the generation cert-manager has seen.
func TestCertificateReady(t *testing.T) {
	cert := func(gen int64, conds ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": conds}}}
		u.SetGeneration(gen)
		return u
	}
	ready := map[string]any{"type": "Ready", "status": "True", "message": "Certificate is up to date and has not expired", "observedGeneration": int64(2)}
	notReady := map[string]any{"type": "Ready", "status": "False", "message": "Issuing certificate as Secret does not exist", "observedGeneration": int64(2)}
	tests := []struct {
		name string
		u    *unstructured.Unstructured
		ok   bool
		msg  string
	}{
		{"no status yet", cert(1), false, "has not reported"},
		{"ready", cert(2, map[string]any{"type": "Issuing", "status": "True"}, ready), true, "up to date"},
		{"not ready", cert(2, notReady), false, "Secret does not exist"},
		{"ready for an older spec", cert(3, ready), false, "not yet observed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ok, msg := CertificateReady(tt.u)
			g.Expect(ok).To(Equal(tt.ok))
			g.Expect(msg).To(ContainSubstring(tt.msg))
		})
	}
}

func TestComputeStatusTLS(t *testing.T) {
	rolledOut := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}}
	type conds map[string]string
	tests := []struct {
		name string
		dep  *appsv1.Deployment
		cert *CertificateObservation
		want conds
	}{
		{name: "issued", dep: rolledOut, cert: &CertificateObservation{Ready: true, Message: "Certificate is up to date"},
			want: conds{"CertificateReady": "True/CertificateIssued", "Available": "True/AllReplicasReady", "Ready": "True/AllReplicasReady"}},
		{name: "a new fleet waiting for its certificate", cert: &CertificateObservation{Message: "just created"},
			want: conds{"CertificateReady": "False/CertificateNotReady", "Available": "False/CertificateNotReady", "Ready": "False/CertificateNotReady",
				"Progressing": "True/CertificateNotReady", "Degraded": "False/Reconciled", "Reconciling": "True/CertificateNotReady"}},
		{name: "a running fleet whose certificate is not Ready is not Available", dep: rolledOut, cert: &CertificateObservation{Message: "issuer not ready"},
			want: conds{"CertificateReady": "False/CertificateNotReady", "Available": "False/CertificateNotReady", "Ready": "False/CertificateNotReady"}},
		{name: "cert-manager not installed", cert: &CertificateObservation{APIMissing: true},
			want: conds{"CertificateReady": "False/CertificateAPIMissing", "Available": "False/CertificateAPIMissing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
				s.Size = ptr.To[int32](3)
				fleettest.WithTLS(nil)(s)
			})
			obs := Observation{Spec: spec, Deployment: tt.dep, Certificate: tt.cert}
			Compute(mc, obs)
			expectConditions(g, mc.Status.Conditions, tt.want)
			before := mc.Status.DeepCopy()
			Compute(mc, obs)
			g.Expect(mc.Status).To(Equal(*before), "an unchanged observation is an unchanged status")

			// Not observed this pass (another phase failed first): what was
			// last known stands.
			Compute(mc, Observation{Spec: spec, Deployment: tt.dep})
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "CertificateReady").Reason).To(Equal(meta.FindStatusCondition(before.Conditions, "CertificateReady").Reason))
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "Available").Status).To(Equal(meta.FindStatusCondition(before.Conditions, "Available").Status))

			// Turning TLS off removes the condition once the Certificate is
			// gone, not before: it is how the next pass knows to delete it.
			_, plain := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) })
			Compute(mc, Observation{Spec: plain, Deployment: rolledOut})
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "CertificateReady")).NotTo(BeNil())
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "Available").Status).To(Equal(metav1.ConditionTrue), "a fleet without TLS does not wait for a certificate")
			Compute(mc, Observation{Spec: plain, Deployment: rolledOut, Certificate: &CertificateObservation{Removed: true}})
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "CertificateReady")).To(BeNil())
		})
	}
}

// expectConditions holds conditions to want, "Status/Reason" by type.
func expectConditions[M ~map[string]string](g Gomega, conditions []metav1.Condition, want M) {
	got := map[string]string{}
	for _, c := range conditions {
		got[c.Type] = string(c.Status) + "/" + c.Reason
	}
	for typ, w := range want {
		g.Expect(got).To(HaveKeyWithValue(typ, w), typ)
	}
}

// TestComputeStatusStatefulSet: a StatefulSet fleet's conditions come from
// its StatefulSet as a Deployment fleet's from its Deployment, and its
// status lists the servers clients configure.
func TestComputeStatusStatefulSet(t *testing.T) {
	set := func(replicas, updated, ready, available int32, observed bool) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
		s.Status = appsv1.StatefulSetStatus{Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available}
		if observed {
			s.Status.ObservedGeneration = 2
		}
		return s
	}
	for _, tt := range []struct {
		name  string
		set   *appsv1.StatefulSet
		ready string
		avail string
	}{
		{"rolled out", set(3, 3, 3, 3, true), "True/AllReplicasReady", "True/AllReplicasReady"},
		{"not yet observed", set(3, 3, 3, 3, false), "False/RollingOut", "True/ReplicasAvailable"},
		{"replacing its highest ordinal", set(3, 2, 2, 2, true), "False/RollingOut", "False/ReplicasNotReady"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
				s.Size = ptr.To[int32](3)
				s.Workload = ptr.To(cachev1alpha1.WorkloadStatefulSet)
			})
			// A fleet that was rolled out (a new one is scaling up).
			mc.Status.Replicas, mc.Status.ReadyReplicas = 3, 3
			servers := []string{"cache-0.cache.ns.svc:11211", "cache-1.cache.ns.svc:11211"}
			Compute(mc, Observation{Spec: spec, StatefulSet: tt.set, Nodes: []string{"cache-0", "cache-1"}, Servers: servers, NodesObserved: true})
			got := func(t string) string {
				c := meta.FindStatusCondition(mc.Status.Conditions, t)
				return string(c.Status) + "/" + c.Reason
			}
			g.Expect(got(cachev1alpha1.ConditionReady)).To(Equal(tt.ready))
			g.Expect(got(cachev1alpha1.ConditionAvailable)).To(Equal(tt.avail))
			g.Expect(mc.Status.Servers).To(Equal(servers))
			g.Expect(mc.Status.Replicas).To(Equal(tt.set.Status.Replicas))
		})
	}
}
