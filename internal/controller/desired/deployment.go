package desired

import (
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/exporter"
	"github.com/example/memcached-operator/internal/policy"
)

// Pod shape constants. The rollout replaces one pod at a time and never
// drops below size, so a spec change costs one pod's cache at a time.
const (
	containerName         = "memcached"
	portName              = "memcached"
	exporterContainerName = "exporter"
	metricsPortName       = "metrics"
	minReadySeconds       = 5
	preStopSeconds        = 5
	gracePeriod           = 30
	revisionHistory       = 5
	hostnameTopology      = "kubernetes.io/hostname"
	antiAffinityScore     = 100

	authVolumeName        = "auth"
	authMountPath         = "/etc/memcached/auth"
	authFileName          = "auth-file"
	reloaderContainerName = "auth-reloader"
	// AuthCheckContainerName is the init container of buildAuthCheck.
	AuthCheckContainerName = "auth-check"
	// authFileMode lets memcached and the sidecars, one user of the pod's
	// own, read the file; it is visible inside the pod only.
	authFileMode int32 = 0o444

	tlsVolumeName = "tls"
	tlsMountPath  = "/etc/memcached/tls"
	// tlsFileMode lets memcached and the reloader, the pod's one user, read
	// the key; like the auth file it is visible inside the pod only.
	tlsFileMode       int32 = 0o444
	plaintextPortName       = "plaintext"
)

// The files cert-manager writes to the Secret, as mounted.
const (
	tlsCertFile = tlsMountPath + "/tls.crt"
	tlsKeyFile  = tlsMountPath + "/tls.key"
	tlsCAFile   = tlsMountPath + "/ca.crt"
)

// authFile is where memcached (-Y) and the sidecars read the auth file.
const authFile = authMountPath + "/" + authFileName

// reloaderResources keep the sidecar tiny: it reads one small file every
// two seconds and sends a signal now and then.
var reloaderResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("8Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")},
}

// Deployment is the Deployment that runs the fleet, from a defaulted spec.
func Deployment(mc *cachev1alpha1.Memcached, spec *cachev1alpha1.MemcachedSpec) *appsv1ac.DeploymentApplyConfiguration {
	return appsv1ac.Deployment(mc.Name, mc.Namespace).
		WithLabels(objectLabels(mc.Name)).
		WithOwnerReferences(ownerReference(mc)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(*spec.Size).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mc.Name))).
			WithMinReadySeconds(minReadySeconds).
			WithRevisionHistoryLimit(revisionHistory).
			WithStrategy(appsv1ac.DeploymentStrategy().
				WithType(appsv1.RollingUpdateDeploymentStrategyType).
				WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
					WithMaxUnavailable(intstr.FromInt32(0)).
					WithMaxSurge(intstr.FromInt32(1)))).
			WithTemplate(podTemplate(mc.Name, spec)))
}

func podTemplate(instance string, spec *cachev1alpha1.MemcachedSpec) *corev1ac.PodTemplateSpecApplyConfiguration {
	podSpec := corev1ac.PodSpec().
		WithContainers(buildContainer(spec)).
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithTerminationGracePeriodSeconds(gracePeriod).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault)))
	// Unset where the platform assigns UIDs: its admission fills them in
	// from the namespace's range, and refuses pods that name another.
	if spec.RunAsUser != nil {
		podSpec.SecurityContext.WithRunAsUser(*spec.RunAsUser).WithRunAsGroup(*spec.RunAsUser)
	}
	if spec.AppArmorProfile != nil {
		podSpec.SecurityContext.WithAppArmorProfile(corev1ac.AppArmorProfile().WithType(*spec.AppArmorProfile))
	}
	if policy.ExporterEnabled(spec) {
		podSpec.WithContainers(buildExporter(spec))
	}
	if spec.Auth != nil || policy.TLSEnabled(spec) {
		podSpec.WithContainers(buildReloader(spec))
	}
	if policy.TLSEnabled(spec) {
		podSpec.WithVolumes(corev1ac.Volume().WithName(tlsVolumeName).WithSecret(corev1ac.SecretVolumeSource().
			WithSecretName(TLSSecretName(instance)).
			WithDefaultMode(tlsFileMode)))
	}
	if spec.Auth != nil {
		// The reloader signals memcached, which it can only see in a
		// shared process namespace.
		podSpec.WithShareProcessNamespace(true).
			WithInitContainers(buildAuthCheck(spec)).
			WithVolumes(corev1ac.Volume().WithName(authVolumeName).WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(spec.Auth.SecretRef.Name).
				WithItems(corev1ac.KeyToPath().WithKey(ptr.Deref(spec.Auth.SecretRef.Key, policy.DefaultAuthSecretKey)).WithPath(authFileName)).
				WithDefaultMode(authFileMode).
				// The auth check, not the mount, holds a pod back while
				// the Secret is missing: the kubelet reports that one.
				WithOptional(true)))
	}
	for _, s := range spec.ImagePullSecrets {
		podSpec.WithImagePullSecrets(corev1ac.LocalObjectReference().WithName(s.Name))
	}
	if len(spec.NodeSelector) > 0 {
		podSpec.WithNodeSelector(spec.NodeSelector)
	}
	for i := range spec.Tolerations {
		podSpec.WithTolerations(toleration(&spec.Tolerations[i]))
	}
	for _, t := range nodeLossTolerations(spec) {
		podSpec.WithTolerations(toleration(&t))
	}
	if a := buildAffinity(instance, spec); a != nil {
		podSpec.WithAffinity(a)
	}
	for i := range spec.TopologySpreadConstraints {
		podSpec.WithTopologySpreadConstraints(topologySpread(instance, &spec.TopologySpreadConstraints[i]))
	}
	if spec.PriorityClassName != nil {
		podSpec.WithPriorityClassName(*spec.PriorityClassName)
	}
	tpl := corev1ac.PodTemplateSpec().
		WithLabels(PodLabels(instance, spec.PodLabels)).
		WithSpec(podSpec)
	if len(spec.PodAnnotations) > 0 {
		tpl.WithAnnotations(spec.PodAnnotations)
	}
	if policy.WarmRestartEnabled(spec) {
		warmPod(tpl, spec)
	}
	return tpl
}

func buildContainer(spec *cachev1alpha1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	probe := func(initialDelay, period int32) *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().
			WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(portName))).
			WithInitialDelaySeconds(initialDelay).
			WithPeriodSeconds(period)
	}
	c := corev1ac.Container().
		WithName(containerName).
		WithImage(ptr.Deref(spec.Image, "")).
		WithImagePullPolicy(ptr.Deref(spec.ImagePullPolicy, corev1.PullIfNotPresent)).
		WithArgs(Args(spec)...).
		WithPorts(corev1ac.ContainerPort().WithName(portName).WithContainerPort(*spec.Port).WithProtocol(corev1.ProtocolTCP)).
		WithReadinessProbe(probe(1, 5)).
		WithLivenessProbe(probe(10, 10)).
		// The sleep lets endpoints drop the pod before memcached stops, so
		// clients see a clean removal instead of refused connections.
		WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().
			WithSleep(corev1ac.SleepAction().WithSeconds(preStopSeconds)))).
		WithSecurityContext(restrictedContainer())
	if res := resources(spec.Resources); res != nil {
		c.WithResources(res)
	}
	if spec.Auth != nil {
		c.WithVolumeMounts(authMount())
	}
	if policy.TLSEnabled(spec) {
		c.WithVolumeMounts(tlsMount())
		if pp := spec.TLS.PlaintextPort; pp != nil {
			c.WithPorts(corev1ac.ContainerPort().WithName(plaintextPortName).WithContainerPort(*pp).WithProtocol(corev1.ProtocolTCP))
		}
	}
	return c
}

// tlsMount is the certificate Secret's volume, read-only.
func tlsMount() *corev1ac.VolumeMountApplyConfiguration {
	return corev1ac.VolumeMount().WithName(tlsVolumeName).WithMountPath(tlsMountPath).WithReadOnly(true)
}

// loopbackAddress is where the sidecars reach memcached: its port when it
// speaks plain text, the loopback listener without TLS when it does not.
func loopbackAddress(spec *cachev1alpha1.MemcachedSpec) string {
	port := *spec.Port
	if policy.TLSEnabled(spec) {
		port = policy.TLSLoopbackPort
	}
	return "127.0.0.1:" + strconv.Itoa(int(port))
}

// authMount is the auth file's volume, read-only, in every container that
// reads it.
func authMount() *corev1ac.VolumeMountApplyConfiguration {
	return corev1ac.VolumeMount().WithName(authVolumeName).WithMountPath(authMountPath).WithReadOnly(true)
}

// buildReloader is the sidecar that makes memcached re-read its auth file
// when the Secret changes (SIGHUP), and load a renewed certificate when
// cert-manager rewrites the TLS Secret (refresh_certs over the loopback
// listener), so that rotating either restarts nothing and empties no cache.
// It runs as memcached's user, which lets it signal memcached without any
// capability. Its name predates TLS; keeping it spares auth fleets a
// rollout.
func buildReloader(spec *cachev1alpha1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	c := corev1ac.Container().
		WithName(reloaderContainerName).
		WithImage(policy.ReloaderImage(spec)).
		WithImagePullPolicy(ptr.Deref(spec.ImagePullPolicy, corev1.PullIfNotPresent)).
		WithCommand("/memcached-auth-reloader").
		WithResources(resources(&reloaderResources)).
		WithSecurityContext(restrictedContainer())
	if spec.Auth != nil {
		c.WithArgs("--auth-file=" + authFile).WithVolumeMounts(authMount())
	}
	if policy.TLSEnabled(spec) {
		c.WithArgs("--tls-cert-file="+tlsCertFile, "--tls-key-file="+tlsKeyFile, "--memcached.address="+loopbackAddress(spec)).
			WithVolumeMounts(tlsMount())
	}
	return c
}

// buildAuthCheck is the init container that holds a pod back, with a
// status that says why, until the auth Secret and its key exist and hold a
// file memcached accepts. The kubelet refuses to create it while its
// environment names a missing Secret or key (CreateContainerConfigError,
// which the pods' cache keeps); the check itself reads the mounted file.
// The variable lives only in this short-lived process, never in memcached's.
func buildAuthCheck(spec *cachev1alpha1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	a := spec.Auth
	return corev1ac.Container().
		WithName(AuthCheckContainerName).
		WithImage(policy.ReloaderImage(spec)).
		WithImagePullPolicy(ptr.Deref(spec.ImagePullPolicy, corev1.PullIfNotPresent)).
		WithCommand("/memcached-auth-reloader").
		WithArgs("--check", "--auth-file="+authFile).
		WithEnv(corev1ac.EnvVar().WithName(authPresentEnv).WithValueFrom(corev1ac.EnvVarSource().
			WithSecretKeyRef(corev1ac.SecretKeySelector().WithName(a.SecretRef.Name).WithKey(ptr.Deref(a.SecretRef.Key, policy.DefaultAuthSecretKey))))).
		WithVolumeMounts(authMount()).
		WithResources(resources(&reloaderResources)).
		WithSecurityContext(restrictedContainer())
}

// restrictedContainer passes the restricted Pod Security Standard with a
// read-only root filesystem.
func restrictedContainer() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

func resources(r *corev1.ResourceRequirements) *corev1ac.ResourceRequirementsApplyConfiguration {
	if r == nil || (len(r.Limits) == 0 && len(r.Requests) == 0) {
		return nil
	}
	// Copies: the apply configuration keeps the list it is given, and the
	// client decodes the API server's answer into it, so a shared list (the
	// package's defaults, the cached Memcached's) would be written by
	// concurrent passes.
	res := corev1ac.ResourceRequirements()
	if len(r.Limits) > 0 {
		res.WithLimits(r.Limits.DeepCopy())
	}
	if len(r.Requests) > 0 {
		res.WithRequests(r.Requests.DeepCopy())
	}
	return res
}

// buildExporter is the exporter sidecar: it reaches memcached over the
// pod's loopback and serves on the metrics port the Service exposes.
func buildExporter(spec *cachev1alpha1.MemcachedSpec) *corev1ac.ContainerApplyConfiguration {
	e := spec.Monitoring.Exporter
	c := corev1ac.Container().
		WithName(exporterContainerName).
		WithImage(ptr.Deref(e.Image, "")).
		WithImagePullPolicy(ptr.Deref(spec.ImagePullPolicy, corev1.PullIfNotPresent)).
		WithCommand("/memcached-exporter").
		WithArgs(
			"--memcached.address="+loopbackAddress(spec),
			"--web.listen-address=:"+strconv.Itoa(exporter.DefaultPort)).
		WithPorts(corev1ac.ContainerPort().WithName(metricsPortName).WithContainerPort(exporter.DefaultPort).WithProtocol(corev1.ProtocolTCP)).
		WithReadinessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString(metricsPortName))).
			WithPeriodSeconds(10)).
		WithSecurityContext(restrictedContainer())
	if res := resources(e.Resources); res != nil {
		c.WithResources(res)
	}
	if spec.Auth != nil {
		// memcached answers stats only to a client that logged in.
		c.WithArgs("--memcached.auth-file=" + authFile).WithVolumeMounts(authMount())
	}
	return c
}

// Args is memcached's command line for a resolved spec. extraArgs come
// first: memcached keeps the last value of an option, so the fields' own
// options always win, whatever admission let through.
func Args(spec *cachev1alpha1.MemcachedSpec) []string {
	args := append(slices.Clone(spec.ExtraArgs),
		"-p", strconv.Itoa(int(*spec.Port)),
		"-m", strconv.Itoa(int(*spec.MemoryLimitMB)),
		"-c", strconv.Itoa(int(*spec.MaxConnections)),
		"-t", strconv.Itoa(int(*spec.Threads)),
		"-I", *spec.MaxItemSize,
	)
	switch ptr.Deref(spec.Verbosity, 0) {
	case 1:
		args = append(args, "-v")
	case 2:
		args = append(args, "-vv")
	}
	if spec.Auth != nil {
		args = append(args, "-Y", authFile)
	}
	if policy.WarmRestartEnabled(spec) {
		args = append(args, "-e", memoryFile)
	}
	if t := spec.TLS; policy.TLSEnabled(spec) {
		// The TLS port on every address, as without -l; a listener without
		// TLS on the pod's loopback for the exporter and the reloader, which
		// only processes inside the pod's network namespace can reach (they
		// then need no TLS client, nor a certificate of their own); and the
		// plaintext port on every address only when the user asked for it.
		listen := "*:" + strconv.Itoa(int(*spec.Port)) + ",notls:127.0.0.1:" + strconv.Itoa(int(policy.TLSLoopbackPort))
		if pp := t.PlaintextPort; pp != nil {
			listen += ",notls:*:" + strconv.Itoa(int(*pp))
		}
		ssl := "ssl_chain_cert=" + tlsCertFile + ",ssl_key=" + tlsKeyFile + ",ssl_verify_mode=" + strconv.Itoa(verifyMode(t.ClientAuth))
		if verifyMode(t.ClientAuth) != 0 {
			ssl += ",ssl_ca_cert=" + tlsCAFile
		}
		args = append(args, "-Z", "-l", listen, "-o", ssl)
	}
	return args
}

// verifyMode is memcached's ssl_verify_mode for spec.tls.clientAuth.
func verifyMode(c *cachev1alpha1.TLSClientAuth) int {
	switch ptr.Deref(c, cachev1alpha1.TLSClientAuthNone) {
	case cachev1alpha1.TLSClientAuthRequest:
		return 1
	case cachev1alpha1.TLSClientAuthRequire:
		return 2
	}
	return 0
}

// buildAffinity merges the anti-affinity preset into the user's affinity; an
// explicit podAntiAffinity wins over the preset.
func buildAffinity(instance string, spec *cachev1alpha1.MemcachedSpec) *corev1ac.AffinityApplyConfiguration {
	var out *corev1ac.AffinityApplyConfiguration
	if spec.Affinity != nil {
		out = affinity(spec.Affinity)
	}
	if spec.AntiAffinityPreset == nil || (spec.Affinity != nil && spec.Affinity.PodAntiAffinity != nil) {
		return out
	}
	if out == nil {
		out = corev1ac.Affinity()
	}
	term := corev1ac.PodAffinityTerm().
		WithTopologyKey(hostnameTopology).
		WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(instance)))
	anti := corev1ac.PodAntiAffinity()
	if *spec.AntiAffinityPreset == cachev1alpha1.AntiAffinityHard {
		anti.WithRequiredDuringSchedulingIgnoredDuringExecution(term)
	} else {
		anti.WithPreferredDuringSchedulingIgnoredDuringExecution(corev1ac.WeightedPodAffinityTerm().
			WithWeight(antiAffinityScore).WithPodAffinityTerm(term))
	}
	return out.WithPodAntiAffinity(anti)
}

// topologySpread gives a constraint without a selector the fleet's own, which
// is what a user of a single fleet means.
func topologySpread(instance string, c *corev1.TopologySpreadConstraint) *corev1ac.TopologySpreadConstraintApplyConfiguration {
	c = c.DeepCopy()
	if c.LabelSelector == nil {
		c.LabelSelector = &metav1.LabelSelector{MatchLabels: selectorLabels(instance)}
	}
	return mustConvert[corev1ac.TopologySpreadConstraintApplyConfiguration](c)
}

// nodeLossTolerations bound how long pods stay on a node that stopped
// answering (spec.nodeLossTolerationSeconds), for each taint the user's own
// tolerations do not already cover with a NoExecute effect.
func nodeLossTolerations(spec *cachev1alpha1.MemcachedSpec) []corev1.Toleration {
	if spec.NodeLossTolerationSeconds == nil {
		return nil
	}
	var out []corev1.Toleration
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		taint := &corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute}
		if slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), taint, false) }) {
			continue
		}
		out = append(out, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			TolerationSeconds: ptr.To(*spec.NodeLossTolerationSeconds)})
	}
	return out
}

func toleration(t *corev1.Toleration) *corev1ac.TolerationApplyConfiguration {
	return mustConvert[corev1ac.TolerationApplyConfiguration](t)
}

func affinity(a *corev1.Affinity) *corev1ac.AffinityApplyConfiguration {
	return mustConvert[corev1ac.AffinityApplyConfiguration](a)
}

// authPresentEnv is the auth check's reference to the auth Secret's key:
// the kubelet's resolving of it is the point.
const authPresentEnv = "AUTH_SECRET_REQUIRED"
