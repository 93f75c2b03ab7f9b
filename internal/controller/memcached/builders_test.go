package memcached_test

import (
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/memcached"
	"github.com/example/memcached-operator/internal/policy"
)

func newMemcached(mutate func(*cachev1alpha1.MemcachedSpec)) (*cachev1alpha1.Memcached, *cachev1alpha1.MemcachedSpec) {
	mc := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns", UID: "uid-1", Generation: 3}}
	if mutate != nil {
		mutate(&mc.Spec)
	}
	return mc, policy.Resolve(&mc.Spec, policy.Config{DefaultImage: "memcached:test", ExporterImage: "operator:test"})
}

func TestBuildDeployment(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*cachev1alpha1.MemcachedSpec)
		check  func(g Gomega, d *appsv1.Deployment)
	}{{
		name: "defaults: safe rollout, restricted pod, probes on the memcached port",
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
			g.Expect(d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(BeZero())
			g.Expect(d.Spec.Strategy.RollingUpdate.MaxSurge.IntValue()).To(Equal(1))
			g.Expect(d.Spec.MinReadySeconds).To(BeNumerically(">", 0))
			g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{
				"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "cache"}))
			g.Expect(d.OwnerReferences).To(HaveLen(1))
			g.Expect(*d.OwnerReferences[0].Controller).To(BeTrue())
			pod := d.Spec.Template.Spec
			g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
			g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
			g.Expect(pod.SecurityContext.AppArmorProfile).To(BeNil(), "the kubelet refuses a profile on a node without AppArmor")
			g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
			c := pod.Containers[0]
			g.Expect(c.Image).To(Equal("memcached:test"))
			g.Expect(c.Args).To(Equal([]string{"-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m"}))
			g.Expect(c.Ports[0].ContainerPort).To(Equal(int32(11211)))
			g.Expect(c.ReadinessProbe.TCPSocket.Port.StrVal).To(Equal("memcached"))
			g.Expect(c.LivenessProbe.TCPSocket).NotTo(BeNil())
			g.Expect(c.Lifecycle.PreStop.Sleep.Seconds).To(BeNumerically(">", 0))
			g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
			g.Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
			g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
			g.Expect(c.Resources.Limits).To(BeEmpty())
			g.Expect(pod.Affinity).To(BeNil())
		},
	}, {
		name: "the runtime's AppArmor profile, asked for",
		mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.AppArmorProfile = ptr.To(corev1.AppArmorProfileTypeRuntimeDefault)
		},
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.SecurityContext.AppArmorProfile).To(Equal(&corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}))
		},
	}, {
		name: "memcached settings become flags; extra args go first, so the fields' options win",
		mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Port, s.MemoryLimitMB, s.Threads, s.MaxItemSize = ptr.To[int32](2000), ptr.To[int32](256), ptr.To[int32](8), ptr.To("4m")
			s.Verbosity, s.ExtraArgs = ptr.To[int32](2), []string{"-o", "modern"}
		},
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(Equal([]string{
				"-o", "modern", "-p", "2000", "-m", "256", "-c", "1024", "-t", "8", "-I", "4m", "-vv"}))
		},
	}, {
		name: "scheduling fields pass through; the soft preset adds preferred anti-affinity",
		mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Size = ptr.To[int32](4)
			s.NodeSelector = map[string]string{"pool": "cache"}
			s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
			s.AntiAffinityPreset = ptr.To(cachev1alpha1.AntiAffinitySoft)
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway}}
			s.PriorityClassName = ptr.To("high")
			s.PodLabels = map[string]string{"team": "a"}
			s.PodAnnotations = map[string]string{"scrape": "true"}
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		},
		check: func(g Gomega, d *appsv1.Deployment) {
			pod := d.Spec.Template
			g.Expect(*d.Spec.Replicas).To(Equal(int32(4)))
			g.Expect(pod.Spec.NodeSelector).To(HaveKeyWithValue("pool", "cache"))
			g.Expect(pod.Spec.Tolerations).To(HaveLen(1))
			g.Expect(pod.Spec.PriorityClassName).To(Equal("high"))
			g.Expect(pod.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: "regcred"}))
			g.Expect(pod.Labels).To(HaveKeyWithValue("team", "a"))
			g.Expect(pod.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", "cache"))
			g.Expect(pod.Annotations).To(HaveKeyWithValue("scrape", "true"))
			pref := pod.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
			g.Expect(pref).To(HaveLen(1))
			g.Expect(pref[0].PodAffinityTerm.TopologyKey).To(Equal("kubernetes.io/hostname"))
			g.Expect(pod.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels).To(HaveKeyWithValue("app.kubernetes.io/instance", "cache"))
		},
	}, {
		name: "the hard preset requires anti-affinity; an explicit podAntiAffinity wins",
		mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.AntiAffinityPreset = ptr.To(cachev1alpha1.AntiAffinityHard)
		},
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(HaveLen(1))
		},
	}, {
		name: "an explicit podAntiAffinity wins over the preset",
		mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.AntiAffinityPreset = ptr.To(cachev1alpha1.AntiAffinityHard)
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
		},
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution).To(BeEmpty())
		},
	}, {
		name: "no nodeLossTolerationSeconds (a fleet older than the field): no toleration, Kubernetes' default applies",
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Tolerations).To(BeEmpty())
		},
	}, {
		name: "nodeLossTolerationSeconds tolerates a not-ready or unreachable node for that long",
		mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.NodeLossTolerationSeconds = ptr.To[int64](30)
			s.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		},
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Tolerations).To(ConsistOf(
				corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
				corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
				corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
			), "a NoSchedule toleration does not cover eviction")
		},
	}, {
		name: "a user's toleration of the same taint wins",
		mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.NodeLossTolerationSeconds = ptr.To[int64](30)
			s.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](600)}}
		},
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Tolerations).To(ConsistOf(
				corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](600)},
				corev1.Toleration{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
			))
		},
	}, {
		name: "a toleration of every taint covers both",
		mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.NodeLossTolerationSeconds = ptr.To[int64](0)
			s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		},
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(d.Spec.Template.Spec.Tolerations).To(Equal([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc, spec := newMemcached(tt.mutate)
			d := &appsv1.Deployment{}
			g.Expect(roundTrip(memcached.BuildDeployment(mc, spec), d)).To(Succeed())
			tt.check(g, d)
		})
	}
}

func TestExporterSidecar(t *testing.T) {
	g := NewWithT(t)
	mc, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Port = ptr.To[int32](2000)
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		policy.Default(s, policy.Config{ExporterImage: "operator:test"})
	})
	d := &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, spec), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2))
	e := d.Spec.Template.Spec.Containers[1]
	g.Expect(e.Name).To(Equal("exporter"))
	g.Expect(e.Image).To(Equal("operator:test"))
	g.Expect(e.Command).To(Equal([]string{"/memcached-exporter"}))
	g.Expect(e.Args).To(ConsistOf("--memcached.address=127.0.0.1:2000", "--web.listen-address=:9150"))
	g.Expect(e.Ports).To(ConsistOf(HaveField("ContainerPort", int32(9150))))
	g.Expect(*e.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(e.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(e.Resources.Limits.Memory().String()).To(Equal("32Mi"))
	svc := &corev1.Service{}
	g.Expect(roundTrip(memcached.BuildService(mc, spec), svc)).To(Succeed())
	g.Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Name", "memcached"), And(HaveField("Name", "metrics"), HaveField("Port", int32(9150)))))

	// Without the exporter: one container, one port.
	mc, spec = newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(false)}}
	})
	d = &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, spec), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	svc = &corev1.Service{}
	g.Expect(roundTrip(memcached.BuildService(mc, spec), svc)).To(Succeed())
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
}

func TestBuildService(t *testing.T) {
	g := NewWithT(t)
	mc, spec := newMemcached(nil)
	svc := &corev1.Service{}
	g.Expect(roundTrip(memcached.BuildService(mc, spec), svc)).To(Succeed())
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
	g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(11211)))
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue("app.kubernetes.io/instance", "cache"))
}

func TestBuildPodDisruptionBudget(t *testing.T) {
	tests := []struct {
		name           string
		mutate         func(*cachev1alpha1.MemcachedSpec)
		enabled        bool
		minAvail, maxU *intstr.IntOrString
	}{
		{name: "one pod: none, it would block drains"},
		{name: "three pods: maxUnavailable 1", mutate: func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) },
			enabled: true, maxU: ptr.To(intstr.FromInt32(1))},
		{name: "explicit minAvailable", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Size = ptr.To[int32](3)
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%"))}
		}, enabled: true, minAvail: ptr.To(intstr.FromString("50%"))},
		{name: "explicitly disabled", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.Size = ptr.To[int32](3)
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(false)}
		}},
		{name: "explicitly enabled for one pod", mutate: func(s *cachev1alpha1.MemcachedSpec) {
			s.PodDisruptionBudget = &cachev1alpha1.PodDisruptionBudgetSpec{Enabled: ptr.To(true)}
		}, enabled: true, maxU: ptr.To(intstr.FromInt32(1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc, spec := newMemcached(tt.mutate)
			ac := memcached.BuildPodDisruptionBudget(mc, spec)
			if !tt.enabled {
				g.Expect(ac).To(BeNil())
				return
			}
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(roundTrip(ac, pdb)).To(Succeed())
			g.Expect(pdb.Spec.MinAvailable).To(Equal(tt.minAvail))
			g.Expect(pdb.Spec.MaxUnavailable).To(Equal(tt.maxU))
			g.Expect(*pdb.Spec.UnhealthyPodEvictionPolicy).To(BeEquivalentTo("AlwaysAllow"))
		})
	}
}

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
	conflict := memcached.NameConflictError("Deployment", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache"}})
	type conds map[string]string // type -> "Status/Reason"
	tests := []struct {
		name          string
		dep           *appsv1.Deployment
		invalid       field.ErrorList
		err           error
		unschedulable int
		want          conds
	}{
		{name: "new fleet: the Deployment was just created",
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
			mc, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) })
			// What an earlier pass saw; a pass that does not observe keeps it.
			mc.Status.Replicas, mc.Status.ReadyReplicas, mc.Status.Nodes = 3, 3, []string{"old"}
			obs := memcached.Observation{Spec: spec, Deployment: tt.dep, Nodes: []string{"a", "b", "c"}, NodesObserved: tt.err == nil,
				Invalid: tt.invalid, Unschedulable: tt.unschedulable, UnschedulableMessage: "0/3 nodes are available"}
			if tt.err != nil {
				obs.Errors = []error{tt.err}
			}
			memcached.ComputeStatus(mc, obs)
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
			memcached.ComputeStatus(mc, obs)
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
		"a new fleet":                          {short(3, 0, 0, notReady), short(3, 3, 2, notReady), ready(3)},
		// A pod restarted: ready again but not yet available (minReadySeconds).
		"a pod unavailable at the same size, none unready": {ready(3), {3, 3, 3, metav1.ConditionFalse, notReady, 2}, ready(3)},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			mc, _ := newMemcached(nil)
			for i, st := range steps {
				spec := policy.Resolve(&cachev1alpha1.MemcachedSpec{Size: ptr.To(st.size)}, policy.Config{DefaultImage: "memcached:test"})
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(st.size)},
					Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: st.replicas, UpdatedReplicas: st.replicas, ReadyReplicas: st.ready, AvailableReplicas: st.available}}
				memcached.ComputeStatus(mc, memcached.Observation{Spec: spec, Deployment: d})
				c := meta.FindStatusCondition(mc.Status.Conditions, cachev1alpha1.ConditionAvailable)
				g.Expect(c).To(And(HaveField("Status", st.status), HaveField("Reason", st.reason)), "step %d: %+v", i, st)
				if st.reason == up {
					g.Expect(c.Message).To(Equal(fmt.Sprintf("%d of %d pods available; scaling up, and no ready pod was lost", st.available, st.size)))
				}
			}
		})
	}
}

func TestBuildNetworkPolicy(t *testing.T) {
	g := NewWithT(t)
	mc, spec := newMemcached(nil)
	g.Expect(memcached.BuildNetworkPolicy(mc, spec)).To(BeNil(), "off unless enabled")
	mc, spec = newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(false)}
	})
	g.Expect(memcached.BuildNetworkPolicy(mc, spec)).To(BeNil())

	// Enabled with no peers: the namespace's own pods, the memcached port only.
	mc, spec = newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Port = ptr.To[int32](2000)
		s.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}
	})
	np := &networkingv1.NetworkPolicy{}
	g.Expect(roundTrip(memcached.BuildNetworkPolicy(mc, spec), np)).To(Succeed())
	g.Expect(np.OwnerReferences).To(ConsistOf(HaveField("Controller", ptr.To(true))))
	g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": mc.Name}))
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}), "egress is left alone")
	g.Expect(np.Spec.Ingress).To(HaveLen(1))
	g.Expect(np.Spec.Ingress[0].Ports).To(ConsistOf(And(HaveField("Port", ptr.To(intstr.FromInt32(2000))), HaveField("Protocol", ptr.To(corev1.ProtocolTCP)))))
	g.Expect(np.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}), "same namespace")

	// Peers as given, and the metrics port with the exporter.
	web := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}}}
	prom := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}
	block := networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}
	mc, spec = newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		s.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true), From: []networkingv1.NetworkPolicyPeer{web, block}, MetricsFrom: []networkingv1.NetworkPolicyPeer{prom}}
		policy.Default(s, policy.Config{ExporterImage: "operator:test"})
	})
	np = &networkingv1.NetworkPolicy{}
	g.Expect(roundTrip(memcached.BuildNetworkPolicy(mc, spec), np)).To(Succeed())
	g.Expect(np.Spec.Ingress).To(HaveLen(2))
	g.Expect(np.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{web, block}))
	g.Expect(np.Spec.Ingress[1].Ports).To(ConsistOf(HaveField("Port", ptr.To(intstr.FromInt32(9150)))))
	g.Expect(np.Spec.Ingress[1].From).To(Equal([]networkingv1.NetworkPolicyPeer{prom}))
}

// TestAuth: the auth file reaches memcached (-Y), the exporter and the
// reloader through one read-only Secret volume; the password itself is
// never in the Deployment.
func TestAuth(t *testing.T) {
	g := NewWithT(t)
	mc, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "cache-users"}}
	})
	d := &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, spec), d)).To(Succeed())
	pod := d.Spec.Template.Spec
	g.Expect(*pod.ShareProcessNamespace).To(BeTrue(), "the reloader must see memcached to signal it")
	g.Expect(pod.Volumes).To(ConsistOf(corev1.Volume{Name: "auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "cache-users", Items: []corev1.KeyToPath{{Key: "auth", Path: "auth-file"}}, DefaultMode: ptr.To[int32](0o444), Optional: ptr.To(true)}}}))
	mount := corev1.VolumeMount{Name: "auth", MountPath: "/etc/memcached/auth", ReadOnly: true}

	g.Expect(pod.Containers).To(HaveLen(3))
	m, e, r := pod.Containers[0], pod.Containers[1], pod.Containers[2]
	g.Expect(m.Args).To(HaveExactElements("-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m", "-Y", "/etc/memcached/auth/auth-file"))
	g.Expect(m.VolumeMounts).To(ConsistOf(mount))
	g.Expect(e.Name).To(Equal("exporter"))
	g.Expect(e.Args).To(ContainElement("--memcached.auth-file=/etc/memcached/auth/auth-file"))
	g.Expect(e.VolumeMounts).To(ConsistOf(mount))

	g.Expect(r.Name).To(Equal("auth-reloader"))
	g.Expect(r.Image).To(Equal("operator:test"), "the operator image, like the exporter's")
	g.Expect(r.Command).To(Equal([]string{"/memcached-auth-reloader"}))
	g.Expect(r.Args).To(Equal([]string{"--auth-file=/etc/memcached/auth/auth-file"}))
	g.Expect(r.VolumeMounts).To(ConsistOf(mount))
	g.Expect(r.Ports).To(BeEmpty())
	g.Expect(*r.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(*r.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(*r.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(r.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(r.SecurityContext.Capabilities.Add).To(BeEmpty(), "same user as memcached: no capability needed to signal it")
	g.Expect(r.SecurityContext.RunAsUser).To(BeNil(), "runs as the pod's user, memcached's")
	g.Expect(*pod.SecurityContext.RunAsUser).To(Equal(int64(11211)))
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(r.Resources.Requests.Cpu().String()).To(Equal("5m"))
	g.Expect(r.Resources.Limits.Memory().String()).To(Equal("16Mi"))

	raw, err := json.Marshal(d)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("password"))
	g.Expect(pod.Containers).To(HaveEach(HaveField("Env", BeEmpty())), "no credential travels by environment to a process that stays")
	// The auth check holds a pod back, with the kubelet's word, while the
	// Secret or its key is missing; the volume does not wait silently.
	g.Expect(pod.InitContainers).To(ConsistOf(And(HaveField("Name", "auth-check"), HaveField("Args", ConsistOf("--check", "--auth-file=/etc/memcached/auth/auth-file")),
		HaveField("Env", ConsistOf(corev1.EnvVar{Name: "AUTH_SECRET_REQUIRED", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cache-users"}, Key: "auth"}}})),
		HaveField("Image", "operator:test"), HaveField("VolumeMounts", ConsistOf(mount)),
		HaveField("SecurityContext.Capabilities.Drop", ConsistOf(corev1.Capability("ALL"))))))

	withKey := func(key string) *cachev1alpha1.MemcachedSpec {
		_, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "u", Key: ptr.To(key)}, ReloaderImage: ptr.To("reloader:1")}
		})
		return spec
	}
	d = &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, withKey("users.txt")), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Volumes[0].Secret.Items).To(Equal([]corev1.KeyToPath{{Key: "users.txt", Path: "auth-file"}}))
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2), "memcached and the reloader; no exporter asked for")
	g.Expect(d.Spec.Template.Spec.Containers[1].Image).To(Equal("reloader:1"))

	// Without auth: no volume, no sidecar, no shared process namespace.
	_, plain := newMemcached(nil)
	d = &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, plain), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.ShareProcessNamespace).To(BeNil())
	g.Expect(d.Spec.Template.Spec.Volumes).To(BeEmpty())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
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
			mc, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
				s.Size = ptr.To[int32](3)
				s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}}
			})
			obs := memcached.Observation{Spec: spec, Deployment: tt.dep, Auth: memcached.ObserveAuth(tt.pods)}
			memcached.ComputeStatus(mc, obs)
			got := conds{}
			for _, c := range mc.Status.Conditions {
				got[c.Type] = string(c.Status) + "/" + c.Reason
			}
			for typ, want := range tt.want {
				g.Expect(got).To(HaveKeyWithValue(typ, want), typ)
			}
			c := meta.FindStatusCondition(mc.Status.Conditions, "AuthReady")
			g.Expect(c.Message).To(ContainSubstring("users"), "the message names the Secret")
			if c.Reason == "AuthSecretMissing" {
				g.Expect(c.Message).To(MatchRegexp(`in [a-d]: (secret|couldn.t|the auth file: line)`), "and the first pod held back, by name, with the kubelet's or the check's word")
			}
			before := mc.Status.DeepCopy()
			memcached.ComputeStatus(mc, obs)
			g.Expect(mc.Status).To(Equal(*before))

			// Turning auth off removes the condition.
			_, plain := newMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) })
			memcached.ComputeStatus(mc, memcached.Observation{Spec: plain, Deployment: rolledOut})
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "AuthReady")).To(BeNil())
		})
	}
}
