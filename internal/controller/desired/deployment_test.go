package desired_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/desired"
	"github.com/example/memcached-operator/internal/controller/fleettest"
	"github.com/example/memcached-operator/internal/policy"
)

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
			g.Expect(*pod.SecurityContext.RunAsUser).To(Equal(int64(11211)), "the memcached image's user")
			g.Expect(*pod.SecurityContext.RunAsGroup).To(Equal(int64(11211)))
			g.Expect(pod.SecurityContext.FSGroup).To(BeNil())
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
		name:   "a UID of the fleet's own",
		mutate: func(s *cachev1alpha1.MemcachedSpec) { s.RunAsUser = ptr.To[int64](1000680000) },
		check: func(g Gomega, d *appsv1.Deployment) {
			g.Expect(*d.Spec.Template.Spec.SecurityContext.RunAsUser).To(Equal(int64(1000680000)))
			g.Expect(*d.Spec.Template.Spec.SecurityContext.RunAsGroup).To(Equal(int64(1000680000)))
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
			mc, spec := fleettest.NewMemcached(tt.mutate)
			d := &appsv1.Deployment{}
			g.Expect(fleettest.RoundTrip(desired.Deployment(mc, spec), d)).To(Succeed())
			tt.check(g, d)
		})
	}
}

func TestExporterSidecar(t *testing.T) {
	g := NewWithT(t)
	mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Port = ptr.To[int32](2000)
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		policy.Default(s, policy.Config{ExporterImage: "operator:test"})
	})
	d := &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, spec), d)).To(Succeed())
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
	g.Expect(fleettest.RoundTrip(desired.Service(mc, spec), svc)).To(Succeed())
	g.Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Name", "memcached"), And(HaveField("Name", "metrics"), HaveField("Port", int32(9150)))))

	// Without the exporter: one container, one port.
	mc, spec = fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(false)}}
	})
	d = &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, spec), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	svc = &corev1.Service{}
	g.Expect(fleettest.RoundTrip(desired.Service(mc, spec), svc)).To(Succeed())
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
}

func TestBuildService(t *testing.T) {
	g := NewWithT(t)
	mc, spec := fleettest.NewMemcached(nil)
	svc := &corev1.Service{}
	g.Expect(fleettest.RoundTrip(desired.Service(mc, spec), svc)).To(Succeed())
	g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
	g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(11211)))
	g.Expect(svc.Spec.Selector).To(HaveKeyWithValue("app.kubernetes.io/instance", "cache"))
	g.Expect(svc.Annotations).To(BeEmpty())
	g.Expect(svc.Spec.PublishNotReadyAddresses).To(BeFalse(), "clients resolve only ready pods")
}

// TestBuildServiceMetadata: spec.service's labels and annotations reach the
// Service; the operator's labels win over any of the same key (admission
// refuses those, the builder holds without it) and the selector, ports and
// DNS behaviour do not move.
func TestBuildServiceMetadata(t *testing.T) {
	g := NewWithT(t)
	plainMC, plainSpec := fleettest.NewMemcached(nil)
	plain := &corev1.Service{}
	g.Expect(fleettest.RoundTrip(desired.Service(plainMC, plainSpec), plain)).To(Succeed())

	mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Service = &cachev1alpha1.ServiceSpec{
			Labels:      map[string]string{"team": "web", "app.kubernetes.io/instance": "other"},
			Annotations: map[string]string{"external-dns.alpha.kubernetes.io/hostname": "cache.example.org"},
		}
	})
	svc := &corev1.Service{}
	g.Expect(fleettest.RoundTrip(desired.Service(mc, spec), svc)).To(Succeed())
	g.Expect(svc.Labels).To(HaveKeyWithValue("team", "web"))
	g.Expect(svc.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", "cache"), "the operator's label wins")
	for k, v := range plain.Labels {
		g.Expect(svc.Labels).To(HaveKeyWithValue(k, v))
	}
	g.Expect(svc.Annotations).To(Equal(map[string]string{"external-dns.alpha.kubernetes.io/hostname": "cache.example.org"}))
	g.Expect(svc.Spec).To(Equal(plain.Spec), "selector, ports and publishNotReadyAddresses as without metadata")
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
			mc, spec := fleettest.NewMemcached(tt.mutate)
			ac := desired.PodDisruptionBudget(mc, spec)
			if !tt.enabled {
				g.Expect(ac).To(BeNil())
				return
			}
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(fleettest.RoundTrip(ac, pdb)).To(Succeed())
			g.Expect(pdb.Spec.MinAvailable).To(Equal(tt.minAvail))
			g.Expect(pdb.Spec.MaxUnavailable).To(Equal(tt.maxU))
			g.Expect(*pdb.Spec.UnhealthyPodEvictionPolicy).To(BeEquivalentTo("AlwaysAllow"))
		})
	}
}

func TestBuildNetworkPolicy(t *testing.T) {
	g := NewWithT(t)
	mc, spec := fleettest.NewMemcached(nil)
	g.Expect(desired.NetworkPolicy(mc, spec)).To(BeNil(), "off unless enabled")
	mc, spec = fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(false)}
	})
	g.Expect(desired.NetworkPolicy(mc, spec)).To(BeNil())

	// Enabled with no peers: the namespace's own pods, the memcached port only.
	mc, spec = fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Port = ptr.To[int32](2000)
		s.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}
	})
	np := &networkingv1.NetworkPolicy{}
	g.Expect(fleettest.RoundTrip(desired.NetworkPolicy(mc, spec), np)).To(Succeed())
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
	mc, spec = fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		s.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true), From: []networkingv1.NetworkPolicyPeer{web, block}, MetricsFrom: []networkingv1.NetworkPolicyPeer{prom}}
		policy.Default(s, policy.Config{ExporterImage: "operator:test"})
	})
	np = &networkingv1.NetworkPolicy{}
	g.Expect(fleettest.RoundTrip(desired.NetworkPolicy(mc, spec), np)).To(Succeed())
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
	mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "cache-users"}}
	})
	d := &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, spec), d)).To(Succeed())
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
		_, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
			s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "u", Key: ptr.To(key)}, ReloaderImage: ptr.To("reloader:1")}
		})
		return spec
	}
	d = &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, withKey("users.txt")), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Volumes[0].Secret.Items).To(Equal([]corev1.KeyToPath{{Key: "users.txt", Path: "auth-file"}}))
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2), "memcached and the reloader; no exporter asked for")
	g.Expect(d.Spec.Template.Spec.Containers[1].Image).To(Equal("reloader:1"))

	// Without auth: no volume, no sidecar, no shared process namespace.
	_, plain := fleettest.NewMemcached(nil)
	d = &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, plain), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.ShareProcessNamespace).To(BeNil())
	g.Expect(d.Spec.Template.Spec.Volumes).To(BeEmpty())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
}

// TestBuildCertificate: the Certificate covers the names clients reach the
// fleet by, is owned by the fleet, and writes the Secret the pods mount.
func TestBuildCertificate(t *testing.T) {
	g := NewWithT(t)
	mc, spec := fleettest.NewMemcached(fleettest.WithTLS(nil))
	c := desired.Certificate(mc, spec)
	g.Expect(c.GroupVersionKind()).To(Equal(desired.CertificateGVK))
	g.Expect(c.GetName()).To(Equal("cache"))
	g.Expect(c.GetNamespace()).To(Equal("ns"))
	g.Expect(c.GetOwnerReferences()).To(ConsistOf(metav1.OwnerReference{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached", Name: "cache", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}))
	g.Expect(c.GetLabels()).To(HaveKeyWithValue("app.kubernetes.io/instance", "cache"))
	spec0 := c.Object["spec"].(map[string]any)
	g.Expect(spec0["secretName"]).To(Equal("cache-tls"))
	g.Expect(spec0["dnsNames"]).To(ConsistOf("cache", "cache.ns", "cache.ns.svc", "cache.ns.svc.cluster.local", "*.cache.ns.svc", "*.cache.ns.svc.cluster.local"))
	g.Expect(spec0["usages"]).To(ConsistOf("server auth", "digital signature"), "no client auth: a fleet's certificate logs in to no other fleet of a shared issuer")
	g.Expect(spec0["issuerRef"]).To(Equal(map[string]any{"name": "ca", "kind": "Issuer", "group": "cert-manager.io"}))
	g.Expect(spec0["privateKey"]).To(Equal(map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"}), "ECDSA P-256, a new key at each renewal")

	_, cluster := fleettest.NewMemcached(fleettest.WithTLS(func(t *cachev1alpha1.TLSSpec) {
		t.IssuerRef = &cachev1alpha1.TLSIssuerReference{Name: "corp", Kind: ptr.To("ClusterIssuer"), Group: ptr.To("example.io")}
	}))
	g.Expect(desired.Certificate(mc, cluster).Object["spec"].(map[string]any)["issuerRef"]).To(Equal(map[string]any{"name": "corp", "kind": "ClusterIssuer", "group": "example.io"}))
}

// TestTLSPod: memcached serves TLS on its port with the mounted Secret,
// keeps a listener without TLS on loopback only for the sidecars, and on
// the pod's addresses only when plaintextPort asks for it.
func TestTLSPod(t *testing.T) {
	g := NewWithT(t)
	mc, spec := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		fleettest.WithTLS(nil)(s)
	})
	d := &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, spec), d)).To(Succeed())
	pod := d.Spec.Template.Spec
	g.Expect(pod.Volumes).To(ConsistOf(corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "cache-tls", DefaultMode: ptr.To[int32](0o444)}}}))
	g.Expect(pod.ShareProcessNamespace).To(BeNil(), "refresh_certs goes over TCP: no signal, no shared process namespace")
	mount := corev1.VolumeMount{Name: "tls", MountPath: "/etc/memcached/tls", ReadOnly: true}
	g.Expect(pod.Containers).To(HaveLen(3))
	m, e, r := pod.Containers[0], pod.Containers[1], pod.Containers[2]
	g.Expect(m.Args).To(HaveExactElements("-p", "11211", "-m", "64", "-c", "1024", "-t", "4", "-I", "1m",
		"-Z", "-l", "*:11211,notls:127.0.0.1:11299",
		"-o", "ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_verify_mode=0"))
	g.Expect(m.Ports).To(ConsistOf(HaveField("ContainerPort", int32(11211))), "the TLS port is the same; the loopback listener is no container port")
	g.Expect(m.VolumeMounts).To(ConsistOf(mount))
	g.Expect(e.Args).To(ContainElement("--memcached.address=127.0.0.1:11299"))
	g.Expect(e.VolumeMounts).To(BeEmpty(), "the exporter needs no certificate")
	g.Expect(r.Name).To(Equal("auth-reloader"))
	g.Expect(r.Image).To(Equal("operator:test"))
	g.Expect(r.Args).To(HaveExactElements("--tls-cert-file=/etc/memcached/tls/tls.crt", "--tls-key-file=/etc/memcached/tls/tls.key", "--memcached.address=127.0.0.1:11299"))
	g.Expect(r.VolumeMounts).To(ConsistOf(mount))

	// Client certificates verified against the Secret's CA, and the
	// listener without TLS the user asked for.
	_, asked := fleettest.NewMemcached(fleettest.WithTLS(func(t *cachev1alpha1.TLSSpec) {
		t.ClientAuth = ptr.To(cachev1alpha1.TLSClientAuthRequire)
		t.PlaintextPort = ptr.To[int32](11311)
	}))
	d = &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, asked), d)).To(Succeed())
	m = d.Spec.Template.Spec.Containers[0]
	g.Expect(m.Args).To(ContainElements("*:11211,notls:127.0.0.1:11299,notls:*:11311",
		"ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_verify_mode=2,ssl_ca_cert=/etc/memcached/tls/ca.crt"))
	g.Expect(m.Ports).To(ConsistOf(HaveField("ContainerPort", int32(11211)), corev1.ContainerPort{Name: "plaintext", ContainerPort: 11311, Protocol: corev1.ProtocolTCP}))
	g.Expect(desired.Args(asked)).To(ContainElement("ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_verify_mode=2,ssl_ca_cert=/etc/memcached/tls/ca.crt"))
	_, request := fleettest.NewMemcached(fleettest.WithTLS(func(t *cachev1alpha1.TLSSpec) { t.ClientAuth = ptr.To(cachev1alpha1.TLSClientAuthRequest) }))
	g.Expect(desired.Args(request)).To(ContainElement(ContainSubstring("ssl_verify_mode=1,ssl_ca_cert=")))

	svc := &corev1.Service{}
	g.Expect(fleettest.RoundTrip(desired.Service(mc, asked), svc)).To(Succeed())
	g.Expect(svc.Spec.Ports).To(ContainElement(corev1.ServicePort{Name: "plaintext", Protocol: corev1.ProtocolTCP, Port: 11311, TargetPort: intstr.FromString("plaintext")}))
	asked.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}
	np := &networkingv1.NetworkPolicy{}
	g.Expect(fleettest.RoundTrip(desired.NetworkPolicy(mc, asked), np)).To(Succeed())
	g.Expect(np.Spec.Ingress).To(ContainElement(HaveField("Ports", ConsistOf(HaveField("Port", ptr.To(intstr.FromInt32(11311)))))), "the plaintext listener admits the same clients")

	// With auth too: one reloader for both, logging in for refresh_certs.
	_, both := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		fleettest.WithTLS(nil)(s)
		s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}, ReloaderImage: ptr.To("reloader:1")}
	})
	d = &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, both), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2))
	r = d.Spec.Template.Spec.Containers[1]
	g.Expect(r.Image).To(Equal("reloader:1"))
	g.Expect(r.Args).To(HaveExactElements("--auth-file=/etc/memcached/auth/auth-file", "--tls-cert-file=/etc/memcached/tls/tls.crt", "--tls-key-file=/etc/memcached/tls/tls.key", "--memcached.address=127.0.0.1:11299"))
	g.Expect(r.VolumeMounts).To(HaveLen(2))
	g.Expect(*d.Spec.Template.Spec.ShareProcessNamespace).To(BeTrue())

	// Disabled: nothing of TLS in the pod.
	_, off := fleettest.NewMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.TLS = &cachev1alpha1.TLSSpec{Enabled: false, PlaintextPort: ptr.To[int32](11311)}
	})
	d = &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, off), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	g.Expect(d.Spec.Template.Spec.Volumes).To(BeEmpty())
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElements("-Z", "-l"))
}

// TestPlatformAssignsUIDs: with --platform-assigns-uids a fleet that names
// no UID leaves it, and its GID, to the platform, and stays restricted; one
// that names a UID keeps it.
func TestPlatformAssignsUIDs(t *testing.T) {
	g := NewWithT(t)
	cfg := policy.Config{DefaultImage: "memcached:test", PlatformAssignsUIDs: true}
	mc, _ := fleettest.NewMemcached(nil)
	d := &appsv1.Deployment{}
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, policy.Resolve(&mc.Spec, cfg)), d)).To(Succeed())
	pod := d.Spec.Template.Spec
	g.Expect(pod.SecurityContext.RunAsUser).To(BeNil())
	g.Expect(pod.SecurityContext.RunAsGroup).To(BeNil())
	g.Expect(pod.SecurityContext.FSGroup).To(BeNil())
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue(), "restricted: the kubelet refuses a root UID, assigned or from the image")
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		g.Expect(c.SecurityContext.RunAsUser).To(BeNil(), c.Name)
	}

	mc.Spec.RunAsUser = ptr.To[int64](1000680000)
	g.Expect(fleettest.RoundTrip(desired.Deployment(mc, policy.Resolve(&mc.Spec, cfg)), d)).To(Succeed())
	g.Expect(*d.Spec.Template.Spec.SecurityContext.RunAsUser).To(Equal(int64(1000680000)))
}
