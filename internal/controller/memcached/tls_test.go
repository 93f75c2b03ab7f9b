package memcached_test

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/controller/memcached"
)

func withTLS(mutate func(*cachev1alpha1.TLSSpec)) func(*cachev1alpha1.MemcachedSpec) {
	return func(s *cachev1alpha1.MemcachedSpec) {
		s.TLS = &cachev1alpha1.TLSSpec{Enabled: true, IssuerRef: &cachev1alpha1.TLSIssuerReference{Name: "ca"}}
		if mutate != nil {
			mutate(s.TLS)
		}
	}
}

// TestBuildCertificate: the Certificate covers the names clients reach the
// fleet by, is owned by the fleet, and writes the Secret the pods mount.
func TestBuildCertificate(t *testing.T) {
	g := NewWithT(t)
	mc, spec := newMemcached(withTLS(nil))
	c := memcached.BuildCertificate(mc, spec)
	g.Expect(c.GroupVersionKind()).To(Equal(memcached.CertificateGVK))
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

	_, cluster := newMemcached(withTLS(func(t *cachev1alpha1.TLSSpec) {
		t.IssuerRef = &cachev1alpha1.TLSIssuerReference{Name: "corp", Kind: ptr.To("ClusterIssuer"), Group: ptr.To("example.io")}
	}))
	g.Expect(memcached.BuildCertificate(mc, cluster).Object["spec"].(map[string]any)["issuerRef"]).To(Equal(map[string]any{"name": "corp", "kind": "ClusterIssuer", "group": "example.io"}))
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
			ok, msg := memcached.CertificateReady(tt.u)
			g.Expect(ok).To(Equal(tt.ok))
			g.Expect(msg).To(ContainSubstring(tt.msg))
		})
	}
}

// TestTLSPod: memcached serves TLS on its port with the mounted Secret,
// keeps a listener without TLS on loopback only for the sidecars, and on
// the pod's addresses only when plaintextPort asks for it.
func TestTLSPod(t *testing.T) {
	g := NewWithT(t)
	mc, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.Monitoring = &cachev1alpha1.MonitoringSpec{Exporter: &cachev1alpha1.ExporterSpec{Enabled: ptr.To(true)}}
		withTLS(nil)(s)
	})
	d := &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, spec), d)).To(Succeed())
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
	_, asked := newMemcached(withTLS(func(t *cachev1alpha1.TLSSpec) {
		t.ClientAuth = ptr.To(cachev1alpha1.TLSClientAuthRequire)
		t.PlaintextPort = ptr.To[int32](11311)
	}))
	d = &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, asked), d)).To(Succeed())
	m = d.Spec.Template.Spec.Containers[0]
	g.Expect(m.Args).To(ContainElements("*:11211,notls:127.0.0.1:11299,notls:*:11311",
		"ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_verify_mode=2,ssl_ca_cert=/etc/memcached/tls/ca.crt"))
	g.Expect(m.Ports).To(ConsistOf(HaveField("ContainerPort", int32(11211)), corev1.ContainerPort{Name: "plaintext", ContainerPort: 11311, Protocol: corev1.ProtocolTCP}))
	g.Expect(memcached.Args(asked)).To(ContainElement("ssl_chain_cert=/etc/memcached/tls/tls.crt,ssl_key=/etc/memcached/tls/tls.key,ssl_verify_mode=2,ssl_ca_cert=/etc/memcached/tls/ca.crt"))
	_, request := newMemcached(withTLS(func(t *cachev1alpha1.TLSSpec) { t.ClientAuth = ptr.To(cachev1alpha1.TLSClientAuthRequest) }))
	g.Expect(memcached.Args(request)).To(ContainElement(ContainSubstring("ssl_verify_mode=1,ssl_ca_cert=")))

	svc := &corev1.Service{}
	g.Expect(roundTrip(memcached.BuildService(mc, asked), svc)).To(Succeed())
	g.Expect(svc.Spec.Ports).To(ContainElement(corev1.ServicePort{Name: "plaintext", Protocol: corev1.ProtocolTCP, Port: 11311, TargetPort: intstr.FromString("plaintext")}))
	asked.NetworkPolicy = &cachev1alpha1.NetworkPolicySpec{Enabled: ptr.To(true)}
	np := &networkingv1.NetworkPolicy{}
	g.Expect(roundTrip(memcached.BuildNetworkPolicy(mc, asked), np)).To(Succeed())
	g.Expect(np.Spec.Ingress).To(ContainElement(HaveField("Ports", ConsistOf(HaveField("Port", ptr.To(intstr.FromInt32(11311)))))), "the plaintext listener admits the same clients")

	// With auth too: one reloader for both, logging in for refresh_certs.
	_, both := newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		withTLS(nil)(s)
		s.Auth = &cachev1alpha1.AuthSpec{SecretRef: cachev1alpha1.AuthSecretReference{Name: "users"}, ReloaderImage: ptr.To("reloader:1")}
	})
	d = &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, both), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(2))
	r = d.Spec.Template.Spec.Containers[1]
	g.Expect(r.Image).To(Equal("reloader:1"))
	g.Expect(r.Args).To(HaveExactElements("--auth-file=/etc/memcached/auth/auth-file", "--tls-cert-file=/etc/memcached/tls/tls.crt", "--tls-key-file=/etc/memcached/tls/tls.key", "--memcached.address=127.0.0.1:11299"))
	g.Expect(r.VolumeMounts).To(HaveLen(2))
	g.Expect(*d.Spec.Template.Spec.ShareProcessNamespace).To(BeTrue())

	// Disabled: nothing of TLS in the pod.
	_, off := newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
		s.TLS = &cachev1alpha1.TLSSpec{Enabled: false, PlaintextPort: ptr.To[int32](11311)}
	})
	d = &appsv1.Deployment{}
	g.Expect(roundTrip(memcached.BuildDeployment(mc, off), d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	g.Expect(d.Spec.Template.Spec.Volumes).To(BeEmpty())
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElements("-Z", "-l"))
}

func TestComputeStatusTLS(t *testing.T) {
	rolledOut := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}}
	type conds map[string]string
	tests := []struct {
		name string
		dep  *appsv1.Deployment
		cert *memcached.CertificateObservation
		want conds
	}{
		{name: "issued", dep: rolledOut, cert: &memcached.CertificateObservation{Ready: true, Message: "Certificate is up to date"},
			want: conds{"CertificateReady": "True/CertificateIssued", "Available": "True/AllReplicasReady", "Ready": "True/AllReplicasReady"}},
		{name: "a new fleet waiting for its certificate", cert: &memcached.CertificateObservation{Message: "just created"},
			want: conds{"CertificateReady": "False/CertificateNotReady", "Available": "False/CertificateNotReady", "Ready": "False/CertificateNotReady",
				"Progressing": "True/CertificateNotReady", "Degraded": "False/Reconciled", "Reconciling": "True/CertificateNotReady"}},
		{name: "a running fleet whose certificate is not Ready is not Available", dep: rolledOut, cert: &memcached.CertificateObservation{Message: "issuer not ready"},
			want: conds{"CertificateReady": "False/CertificateNotReady", "Available": "False/CertificateNotReady", "Ready": "False/CertificateNotReady"}},
		{name: "cert-manager not installed", cert: &memcached.CertificateObservation{APIMissing: true},
			want: conds{"CertificateReady": "False/CertificateAPIMissing", "Available": "False/CertificateAPIMissing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mc, spec := newMemcached(func(s *cachev1alpha1.MemcachedSpec) {
				s.Size = ptr.To[int32](3)
				withTLS(nil)(s)
			})
			obs := memcached.Observation{Spec: spec, Deployment: tt.dep, Certificate: tt.cert}
			memcached.ComputeStatus(mc, obs)
			got := conds{}
			for _, c := range mc.Status.Conditions {
				got[c.Type] = string(c.Status) + "/" + c.Reason
			}
			for typ, want := range tt.want {
				g.Expect(got).To(HaveKeyWithValue(typ, want), typ)
			}
			before := mc.Status.DeepCopy()
			memcached.ComputeStatus(mc, obs)
			g.Expect(mc.Status).To(Equal(*before), "an unchanged observation is an unchanged status")

			// Not observed this pass (another phase failed first): what was
			// last known stands.
			memcached.ComputeStatus(mc, memcached.Observation{Spec: spec, Deployment: tt.dep})
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "CertificateReady").Reason).To(Equal(meta.FindStatusCondition(before.Conditions, "CertificateReady").Reason))
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "Available").Status).To(Equal(meta.FindStatusCondition(before.Conditions, "Available").Status))

			// Turning TLS off removes the condition once the Certificate is
			// gone, not before: it is how the next pass knows to delete it.
			_, plain := newMemcached(func(s *cachev1alpha1.MemcachedSpec) { s.Size = ptr.To[int32](3) })
			memcached.ComputeStatus(mc, memcached.Observation{Spec: plain, Deployment: rolledOut})
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "CertificateReady")).NotTo(BeNil())
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "Available").Status).To(Equal(metav1.ConditionTrue), "a fleet without TLS does not wait for a certificate")
			memcached.ComputeStatus(mc, memcached.Observation{Spec: plain, Deployment: rolledOut, Certificate: &memcached.CertificateObservation{Removed: true}})
			g.Expect(meta.FindStatusCondition(mc.Status.Conditions, "CertificateReady")).To(BeNil())
		})
	}
}
