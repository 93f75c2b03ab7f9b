package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SizeSchemaMaximum is the hard cap on spec.size that the CRD schema enforces
// whatever the operator's --max-size policy says; the policy can only be lower.
const SizeSchemaMaximum = 1000

// AntiAffinityPreset spreads memcached pods over nodes without writing an
// affinity stanza by hand.
// +kubebuilder:validation:Enum=soft;hard
type AntiAffinityPreset string

const (
	// AntiAffinitySoft prefers one pod per node but still schedules when nodes run out.
	AntiAffinitySoft AntiAffinityPreset = "soft"
	// AntiAffinityHard requires one pod per node; extra pods stay Pending.
	AntiAffinityHard AntiAffinityPreset = "hard"
)

// Workload is the kind of workload that runs a fleet's pods.
// +kubebuilder:validation:Enum=Deployment;StatefulSet
type Workload string

const (
	// WorkloadDeployment runs interchangeable pods with random names: the
	// tutorial's shape, and the default.
	WorkloadDeployment Workload = "Deployment"
	// WorkloadStatefulSet runs pods with stable names, <name>-0 to
	// <name>-(size-1), each with its own DNS name under the headless
	// Service, for clients that hash keys over a static server list.
	WorkloadStatefulSet Workload = "StatefulSet"
)

// MemcachedSpec is the desired state of a memcached fleet.
// +kubebuilder:validation:XValidation:rule="!has(self.podDisruptionBudget) || !has(self.podDisruptionBudget.minAvailable) || !has(self.podDisruptionBudget.maxUnavailable)",message="podDisruptionBudget: set minAvailable or maxUnavailable, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.warmRestart) || !self.warmRestart.enabled || (has(self.workload) && self.workload == 'StatefulSet')",message="warmRestart needs workload StatefulSet: a pod keeps its cache only where it stays, under its name"
type MemcachedSpec struct {
	// size is the number of memcached pods. The schema caps it at 1000; the
	// operator's --max-size policy, enforced by its admission webhook for
	// apply, patch and the scale subresource alike, may set a lower bound.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=1
	// +optional
	Size *int32 `json:"size,omitempty"`

	// image is the memcached container image. Defaults to the operator's
	// --default-image.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Image *string `json:"image,omitempty"`

	// imagePullPolicy is the pull policy of the memcached container.
	// +kubebuilder:validation:Enum=Always;Never;IfNotPresent
	// +optional
	ImagePullPolicy *corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// imagePullSecrets are the secrets used to pull image. Keyed by name, as
	// in a PodSpec, so a name listed twice is refused.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// port is the TCP port memcached listens on and the headless Service
	// exposes. Immutable: every client is configured with it, so a new port
	// means a new Memcached resource. The schema enforces it, so it holds
	// even where the admission webhooks do not run.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="port is immutable: every client is configured with it; create a new Memcached with the new port and move clients to it"
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=11211
	// +optional
	Port *int32 `json:"port,omitempty"`

	// workload is what runs the pods: Deployment (the default: pods with
	// random names, replaced with a surge pod so a rollout never drops below
	// size) or StatefulSet (stable pod names <name>-<i> and DNS names
	// <name>-<i>.<name>.<namespace>.svc, which status.servers lists, for
	// clients configured with a static server list; a replaced pod comes
	// back under its name, so it takes back its place on every client's hash
	// ring). Immutable: switching moves every key to another server, so a new
	// mode means a new Memcached resource. Fleets created before this field
	// existed read as Deployment and stay so.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="workload is immutable: clients are configured with the pods' addresses; create a new Memcached with the other workload and move clients to it"
	// +kubebuilder:default=Deployment
	// +optional
	Workload *Workload `json:"workload,omitempty"`

	// warmRestart keeps each pod's cache when its memcached restarts in
	// place. Needs workload StatefulSet.
	// +optional
	WarmRestart *WarmRestartSpec `json:"warmRestart,omitempty"`

	// memoryLimitMB is the item memory memcached may use, in megabytes (-m).
	// Left unset, it follows the container: 90% of resources.limits.memory
	// when that is set, else 64, computed each time the pods are built (so
	// raising or lowering the memory limit moves it too) and reported in
	// status.effective. When set, it must fit inside the memory limit.
	// +kubebuilder:validation:Minimum=8
	// +kubebuilder:validation:Maximum=1048576
	// +optional
	MemoryLimitMB *int32 `json:"memoryLimitMB,omitempty"`

	// maxConnections is the maximum number of simultaneous connections (-c),
	// at least 5 × threads + 16 (memcached's own descriptors; the threads
	// derived from the CPU limit when threads is unset). memcached sets
	// its open-file limit to it at start and exits when the container's hard
	// limit, which the node's container runtime sets, is lower.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxConnections *int32 `json:"maxConnections,omitempty"`

	// threads is the number of worker threads (-t). Left unset, it follows
	// the CPU limit (rounded up, at most 64), else 4, computed each time the
	// pods are built and reported in status.effective.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +optional
	Threads *int32 `json:"threads,omitempty"`

	// maxItemSize is the largest item memcached stores (-I), in memcached's
	// notation: bytes, or a number followed by k or m, a multiple of 512k
	// (memcached's slab chunk) up to 1024m.
	// +kubebuilder:validation:Pattern=`^[0-9]+[kKmM]?$`
	// +optional
	MaxItemSize *string `json:"maxItemSize,omitempty"`

	// verbosity is memcached's log verbosity: 0 quiet, 1 errors and warnings
	// (-v), 2 also client commands (-vv).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2
	// +optional
	Verbosity *int32 `json:"verbosity,omitempty"`

	// extraArgs are further memcached options, read with memcached's own
	// option grammar (short, clustered, attached values, long options and
	// their unambiguous prefixes). Only options no field owns and that can
	// run in a restricted container are accepted: -M, -C, -F, -X, -W, -R,
	// -b, -B, -f, -n, -D, -o and their long forms. They are placed before
	// the options the fields set, so a field always has the last word.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=256
	// +optional
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// resources are the memcached container's compute resources. Without a
	// memory limit a pod can grow until the node evicts it; the webhook warns.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector constrains memcached pods to nodes with these labels.
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let memcached pods run on tainted nodes.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// nodeLossTolerationSeconds is how long a pod stays bound to a node that
	// is not ready or unreachable before it is evicted and replaced on
	// another node (tolerations for node.kubernetes.io/not-ready and
	// node.kubernetes.io/unreachable, effect NoExecute). A cache pod on a lost
	// node serves nobody, so new fleets get 30 s at creation instead of
	// Kubernetes' 300 s. Unset (fleets created with webhooks off, or before
	// this field existed) leaves Kubernetes' default, so an operator upgrade
	// never rolls existing fleets to add it. A toleration in tolerations for
	// the same key wins.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	NodeLossTolerationSeconds *int64 `json:"nodeLossTolerationSeconds,omitempty"`

	// affinity is the pods' full affinity. When it sets podAntiAffinity,
	// antiAffinityPreset is ignored.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// antiAffinityPreset spreads pods across nodes (kubernetes.io/hostname):
	// "soft" prefers it, "hard" requires it. Unset means no preset.
	// +optional
	AntiAffinityPreset *AntiAffinityPreset `json:"antiAffinityPreset,omitempty"`

	// topologySpreadConstraints are the pods' topology spread constraints. A
	// constraint without a labelSelector gets one that selects this fleet.
	// Keyed by topologyKey and whenUnsatisfiable, as in a PodSpec.
	// +listType=map
	// +listMapKey=topologyKey
	// +listMapKey=whenUnsatisfiable
	// +kubebuilder:validation:MaxItems=16
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// podDisruptionBudget shapes the PodDisruptionBudget that keeps voluntary
	// evictions (node drains) from emptying the cache at once. Enabled by
	// default when size > 1, with maxUnavailable 1.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// podLabels are added to the pods' labels; they cannot override the
	// labels the operator selects pods by.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`

	// podAnnotations are added to the pods' annotations, at most 32 of at
	// most 1024 bytes each. Keys under cache.example.com (the operator's
	// own) are refused, and so are keys under kubernetes.io and k8s.io but
	// for cluster-autoscaler.kubernetes.io/safe-to-evict and
	// kubectl.kubernetes.io/default-container and default-logs-container.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 1024)",message="each pod annotation's value is at most 1024 bytes"
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`

	// service adds labels and annotations to the fleet's headless Service,
	// for tools that read it (external-dns, service meshes).
	// +optional
	Service *ServiceSpec `json:"service,omitempty"`

	// runAsUser is the UID, and the GID, the pods run as. Unset: 11211, the
	// upstream image's memcached user, unless the operator runs with
	// --platform-assigns-uids (OpenShift's restricted-v2 SCC and the like),
	// where the pods name none and the platform assigns one from the
	// namespace's range.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	// +optional
	RunAsUser *int64 `json:"runAsUser,omitempty"`

	// priorityClassName is the pods' PriorityClass.
	// +optional
	PriorityClassName *string `json:"priorityClassName,omitempty"`

	// appArmorProfile confines the pods' containers with the container
	// runtime's default AppArmor profile. The kubelet refuses such a pod on a
	// node without AppArmor, so it is off unless set here or by the operator's
	// --default-apparmor-profile, which the defaulting webhook pins on
	// creation. Where it is unset, runtimes with AppArmor apply their default
	// profile anyway.
	// +kubebuilder:validation:Enum=RuntimeDefault
	// +optional
	AppArmorProfile *corev1.AppArmorProfileType `json:"appArmorProfile,omitempty"`

	// monitoring exposes the fleet's memcached statistics to Prometheus.
	// +optional
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`

	// networkPolicy limits who may reach the fleet's pods: memcached's
	// protocol has no authentication of its own, so anyone who can connect
	// can read, overwrite or flush every key.
	// +optional
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// auth turns on memcached's ASCII authentication (-Y): every command is
	// refused until the client has sent a user name and password from the
	// auth file held in a Secret the user owns. Rotating the Secret's
	// contents reloads the credentials in running pods, without a restart.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// tls encrypts the traffic between clients and the fleet's pods with a
	// certificate cert-manager issues for the fleet's Service names. The
	// operator owns a cert-manager Certificate (Secret <name>-tls); renewed
	// certificates are loaded by the running pods without a restart.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`
}

// WarmRestartSpec keeps a pod's cache through restarts of its memcached:
// memcached keeps its items in a memory file (-e) on a memory-backed
// volume of the pod, and a launcher beside it turns the container's stop
// into a save (SIGUSR1). An image change is then made in place, one pod at
// a time by the operator, each pod's memcached restarting with its cache; a
// change of anything else replaces the pod, which starts empty, as does a
// memcached that crashes or is OOM-killed. The memory file is the item
// memory, not a copy: it counts against the memory limit as item memory
// does without it.
type WarmRestartSpec struct {
	// enabled turns warm restarts on. Turning it on or off changes the pod
	// template, so it replaces every pod.
	Enabled bool `json:"enabled"`

	// launcherImage is the image of the init container that puts the
	// launcher beside memcached. Defaults to the operator's --exporter-image
	// (the operator image, which holds /memcached-launcher), pinned when
	// warm restarts are turned on, like spec.image.
	// +kubebuilder:validation:MinLength=1
	// +optional
	LauncherImage *string `json:"launcherImage,omitempty"`
}

// TLSSpec turns on memcached's TLS (-Z) with a certificate from cert-manager.
// It closes eavesdropping and tampering on the path between clients and the
// pods; who may connect at all is spec.networkPolicy's and spec.auth's
// business, or clientAuth's.
type TLSSpec struct {
	// enabled turns TLS on: memcached's port then speaks TLS only, and the
	// operator owns a cert-manager Certificate for the fleet. Turning it off
	// deletes the Certificate (its Secret stays, as cert-manager leaves it).
	Enabled bool `json:"enabled"`

	// issuerRef names the cert-manager Issuer (in the fleet's namespace) or
	// ClusterIssuer that signs the fleet's certificate. Required when
	// enabled.
	// +optional
	IssuerRef *TLSIssuerReference `json:"issuerRef,omitempty"`

	// clientAuth is whether memcached asks clients for a certificate
	// (ssl_verify_mode): None (the default), Request (verified when sent)
	// or Require (refused without one). Clients' certificates are verified
	// against the ca.crt of the fleet's certificate Secret, so Request and
	// Require need an issuer that fills it (CA, SelfSigned, Vault).
	// +kubebuilder:validation:Enum=None;Request;Require
	// +optional
	ClientAuth *TLSClientAuth `json:"clientAuth,omitempty"`

	// plaintextPort, when set, keeps a second listener without TLS on this
	// port, for clients that cannot speak TLS yet. It must differ from
	// spec.port. Unset (the default): the fleet serves TLS only.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	PlaintextPort *int32 `json:"plaintextPort,omitempty"`

	// reloaderImage is the image of the sidecar that makes memcached load a
	// renewed certificate without a restart. When spec.auth is set its
	// reloaderImage runs the one sidecar for both and this is unused.
	// Defaults to the operator's --exporter-image, pinned when TLS is
	// turned on, like spec.image.
	// +kubebuilder:validation:MinLength=1
	// +optional
	ReloaderImage *string `json:"reloaderImage,omitempty"`
}

// TLSIssuerReference names a cert-manager issuer.
type TLSIssuerReference struct {
	// name of the issuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// kind of the issuer: Issuer (the default, in the fleet's namespace) or
	// ClusterIssuer.
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +optional
	Kind *string `json:"kind,omitempty"`

	// group of the issuer's API. Defaults to cert-manager.io; external
	// issuers have their own.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Group *string `json:"group,omitempty"`
}

// TLSClientAuth is whether memcached asks clients for a certificate.
type TLSClientAuth string

// The client certificate modes, memcached's ssl_verify_mode 0, 1 and 2.
const (
	TLSClientAuthNone    TLSClientAuth = "None"
	TLSClientAuthRequest TLSClientAuth = "Request"
	TLSClientAuthRequire TLSClientAuth = "Require"
)

// AuthSpec configures memcached's ASCII authentication. The protocol sends
// the password in plain text: it keeps out clients that can reach the pods
// but do not hold the credentials, not those who can read the traffic.
type AuthSpec struct {
	// secretRef names the Secret, in the fleet's namespace, whose key holds
	// memcached's auth file: one "username:password" line per credential, at
	// most 8 lines of at most 256 bytes each. The pods mount it; the
	// operator never reads its data. Until the Secret exists the fleet's
	// Deployment is neither created nor changed (AuthReady is False).
	SecretRef AuthSecretReference `json:"secretRef"`

	// reloaderImage is the image of the sidecar that signals memcached to
	// re-read the auth file when the Secret changes. Defaults to the
	// operator's --exporter-image (the operator image, which holds
	// /memcached-auth-reloader), pinned when auth is turned on, like
	// spec.image.
	// +kubebuilder:validation:MinLength=1
	// +optional
	ReloaderImage *string `json:"reloaderImage,omitempty"`
}

// AuthSecretReference names the key of a Secret in the fleet's namespace.
type AuthSecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key of the Secret that holds the auth file. Defaults to "auth".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Key *string `json:"key,omitempty"`
}

// NetworkPolicySpec configures the NetworkPolicy the operator owns for a
// fleet. It takes effect only in a cluster whose network plugin enforces
// NetworkPolicy.
type NetworkPolicySpec struct {
	// enabled creates the fleet's NetworkPolicy; disabling it deletes it. Off
	// unless set: a policy turned on by an operator upgrade would cut off
	// every client outside the namespace at once.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// from are the peers that may connect to the memcached port (a
	// NetworkPolicy's ingress peers: podSelector, namespaceSelector, both
	// together, or an ipBlock). Empty: the pods of the fleet's namespace.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	From []networkingv1.NetworkPolicyPeer `json:"from,omitempty"`

	// metricsFrom are the peers that may connect to the exporter's metrics
	// port, when the fleet runs the exporter; usually the namespace of
	// Prometheus. Empty: the pods of the fleet's namespace.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	MetricsFrom []networkingv1.NetworkPolicyPeer `json:"metricsFrom,omitempty"`
}

// MonitoringSpec exposes a fleet's memcached statistics to Prometheus.
type MonitoringSpec struct {
	// exporter runs a memcached exporter beside memcached in every pod,
	// serving the upstream memcached_exporter's metrics on port 9150 (named
	// "metrics" on the pod and the Service).
	// +optional
	Exporter *ExporterSpec `json:"exporter,omitempty"`

	// serviceMonitor asks the operator for a Prometheus Operator
	// ServiceMonitor that scrapes the exporter. It needs the exporter.
	// +optional
	ServiceMonitor *ServiceMonitorSpec `json:"serviceMonitor,omitempty"`
}

// ExporterSpec configures the exporter sidecar.
type ExporterSpec struct {
	// enabled adds the exporter. Off unless set: adding it changes the pod
	// template, which replaces every pod one at a time, and the operator
	// never does that to a fleet on its own (an operator upgrade must not
	// empty caches).
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// image is the exporter's image. Defaults to the operator's
	// --exporter-image (the operator image, which holds /memcached-exporter),
	// pinned when the exporter is enabled, like spec.image.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Image *string `json:"image,omitempty"`

	// resources are the exporter container's. Defaults: requests 10m CPU and
	// 16Mi memory, a 32Mi memory limit.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ServiceMonitorSpec configures the fleet's ServiceMonitor.
type ServiceMonitorSpec struct {
	// enabled creates the ServiceMonitor when the monitoring.coreos.com/v1
	// API is served; without it, the MonitoringReady condition says so.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// interval between scrapes, such as 30s, at least 10s; empty uses
	// Prometheus' own. Each scrape times out after 5s.
	// +kubebuilder:validation:Pattern=`^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`
	// +kubebuilder:validation:XValidation:rule="self == '' || self == '0' || duration(self) >= duration('10s')",message="must be at least 10s: the exporter opens a connection to memcached for each scrape"
	// +optional
	Interval *string `json:"interval,omitempty"`

	// labels are added to the ServiceMonitor, for a Prometheus whose
	// serviceMonitorSelector asks for them.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// PodDisruptionBudgetSpec configures the fleet's PodDisruptionBudget.
type PodDisruptionBudgetSpec struct {
	// enabled turns the PodDisruptionBudget on or off. Defaults to true when
	// size > 1: a budget over a single pod would block every node drain.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// minAvailable is the number (0 or more) or percentage (0% to 100%) of
	// pods that must stay up.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a whole number of 0 or more, or a percentage from 0% to 100%"
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`

	// maxUnavailable is the number (0 or more) or percentage (0% to 100%) of
	// pods that may be down. Defaults to 1 when minAvailable is unset.
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a whole number of 0 or more, or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// MemcachedStatus is the observed state of a memcached fleet.
type MemcachedStatus struct {
	// nodes are the names of the fleet's pods that are ready to serve, as
	// the headless Service's EndpointSlices list them (pending, unready and
	// terminating pods are left out), sorted so that the list only changes
	// when the serving set does.
	// +listType=atomic
	// +optional
	Nodes []string `json:"nodes,omitempty"`

	// servers are the host:port addresses of the pods ready to serve, for a
	// fleet whose workload is StatefulSet: each pod's stable DNS name
	// (<name>-<i>.<name>.<namespace>.svc) and the memcached port, sorted by
	// ordinal, ready to paste into a client's server list.
	// +listType=atomic
	// +optional
	Servers []string `json:"servers,omitempty"`

	// replicas is the number of pods the Deployment or StatefulSet runs (the scale
	// subresource's status.replicas).
	// +optional
	Replicas int32 `json:"replicas"`

	// readyReplicas is the number of pods ready to serve.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`

	// selector is the label selector of the fleet's pods, in string form, for
	// the scale subresource (kubectl scale, HorizontalPodAutoscaler).
	// +optional
	Selector string `json:"selector,omitempty"`

	// effective is what the pods are built with, derived values included.
	// +optional
	Effective *EffectiveSettings `json:"effective,omitempty"`

	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready, Available, Progressing, Degraded, Reconciling
	// and Stalled, each with the generation it was computed for.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EffectiveSettings are the memcached settings in force, with the values
// the spec leaves to the operator (image, memory, threads) resolved.
type EffectiveSettings struct {
	// image is the memcached image the pods run.
	// +optional
	Image string `json:"image,omitempty"`

	// memoryLimitMB is the -m memcached runs with.
	// +optional
	MemoryLimitMB int32 `json:"memoryLimitMB,omitempty"`

	// threads is the -t memcached runs with.
	// +optional
	Threads int32 `json:"threads,omitempty"`

	// args is memcached's whole command line.
	// +listType=atomic
	// +optional
	Args []string `json:"args,omitempty"`
}

// Condition types of a Memcached. Ready, Reconciling and Stalled follow the
// kstatus conventions that Flux, Argo CD and `kubectl wait` read.
const (
	// ConditionReady is True when the fleet runs the current spec: every pod
	// updated, size pods available, nothing left to roll or repair.
	ConditionReady = "Ready"
	// ConditionAvailable is True when at least size pods are available to
	// serve (the Deployment's own meaning: old pods count while a rollout
	// replaces them, since they still serve).
	ConditionAvailable = "Available"
	// ConditionProgressing is True while a rollout or scale is under way.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the operator cannot make the fleet match its spec.
	ConditionDegraded = "Degraded"
	// ConditionReconciling is True while the operator is still working
	// towards the spec (kstatus: InProgress).
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the operator cannot make progress
	// without a change from the user (kstatus: Failed).
	ConditionStalled = "Stalled"
	// ConditionServiceMonitorReady is present while spec.monitoring asks for
	// a ServiceMonitor: True once it is applied, False while the
	// monitoring.coreos.com/v1 API is not served.
	ConditionServiceMonitorReady = "ServiceMonitorReady"
	// ConditionAuthReady is present while spec.auth is set: True when the
	// Secret it names exists, False while it does not.
	ConditionAuthReady = "AuthReady"
	// ConditionCertificateReady is present while spec.tls is enabled: the
	// Ready condition of the fleet's cert-manager Certificate.
	ConditionCertificateReady = "CertificateReady"
	// ConditionPaused is present, True, while the fleet carries the
	// PausedAnnotation: the operator leaves its objects alone. kstatus does
	// not read it; a spec changed while paused shows as an observedGeneration
	// behind the generation (kstatus: InProgress) until the operator resumes.
	ConditionPaused = "Paused"
)

// Condition reasons of a Memcached.
const (
	// ReasonAllReplicasReady: every desired pod is ready and up to date.
	ReasonAllReplicasReady = "AllReplicasReady"
	// ReasonReplicasAvailable: at least size pods are available.
	ReasonReplicasAvailable = "ReplicasAvailable"
	// ReasonReplicasNotReady: fewer pods are available than desired.
	ReasonReplicasNotReady = "ReplicasNotReady"
	// ReasonScalingUp: fewer pods are available than the size because it
	// grew: the fleet is new, or was Available, and no ready pod was lost
	// since. It is the user's doing, so Available flipping to False for it,
	// and back, sends no event; a pod lost on the way turns it into
	// ReplicasNotReady.
	ReasonScalingUp = "ScalingUp"
	// ReasonScaledToZero: size is 0, so there is nothing to serve.
	ReasonScaledToZero = "ScaledToZero"
	// ReasonRollingOut: the Deployment is replacing or adding pods.
	ReasonRollingOut = "RollingOut"
	// ReasonPodsUnschedulable: a pod the rollout waits for fits on no node
	// (the scheduler's reason is in the message); adding or freeing nodes,
	// or changing the spec, lets the rollout go on.
	ReasonPodsUnschedulable = "PodsUnschedulable"
	// ReasonRolloutComplete: the Deployment has caught up with the spec.
	ReasonRolloutComplete = "RolloutComplete"
	// ReasonReconcileFailed: applying an owned object failed; it is retried.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonRolloutStuck: the Deployment exceeded its progress deadline.
	ReasonRolloutStuck = "ProgressDeadlineExceeded"
	// ReasonReconciled: the operator applied every owned object.
	ReasonReconciled = "Reconciled"
	// ReasonInvalidSpec: the spec breaks a rule (admission was bypassed or
	// a rule tightened); nothing is built until it is fixed.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonNameConflict: an object the fleet needs exists already and
	// belongs to someone else; it is never adopted.
	ReasonNameConflict = "NameConflict"
	// ReasonApplyRejected: the API server refuses an object built from the
	// spec; retrying cannot help until the spec changes.
	ReasonApplyRejected = "ApplyRejected"
	// ReasonServiceMonitorApplied: the fleet's ServiceMonitor matches the spec.
	ReasonServiceMonitorApplied = "ServiceMonitorApplied"
	// ReasonServiceMonitorAPIMissing: the cluster does not serve
	// monitoring.coreos.com/v1; the operator looks again every minute.
	ReasonServiceMonitorAPIMissing = "ServiceMonitorAPIMissing"
	// ReasonAuthSecretFound: the fleet's pods started with the auth file
	// of the Secret spec.auth names.
	ReasonAuthSecretFound = "AuthSecretFound"
	// ReasonAuthSecretMissing: the kubelet cannot start memcached in a pod
	// of the fleet because the Secret spec.auth names, or its key, does not
	// exist. The operator reads no Secret: this is what the pods report.
	// Pods already serving keep serving (a rollout replaces none of them
	// before a new pod is ready).
	ReasonAuthSecretMissing = "AuthSecretMissing"
	// ReasonAuthSecretPending: no pod of the fleet has started yet, so
	// whether the Secret exists is not known.
	ReasonAuthSecretPending = "AuthSecretPending"
	// ReasonCertificateIssued: the fleet's Certificate is Ready, its Secret
	// holds a valid certificate.
	ReasonCertificateIssued = "CertificateIssued"
	// ReasonCertificateNotReady: the fleet's Certificate is not Ready yet;
	// the Deployment is left as it is (a pod would wait for the Secret, or
	// start without a valid certificate) until it is.
	ReasonCertificateNotReady = "CertificateNotReady"
	// ReasonCertificateAPIMissing: the cluster does not serve
	// cert-manager.io/v1; the operator looks again every minute.
	ReasonCertificateAPIMissing = "CertificateAPIMissing"
	// ReasonPaused: the fleet carries the PausedAnnotation.
	ReasonPaused = "Paused"
)

// PausedAnnotation on a Memcached, with the value "true", makes the operator
// leave the fleet's objects alone (no apply, no scale-down mark, no status
// but the Paused condition) until it is removed or set to another value.
const PausedAnnotation = "memcached.cache.example.com/paused"

// ServiceSpec is metadata for the fleet's headless Service.
type ServiceSpec struct {
	// labels are added to the Service's labels (the EndpointSlice
	// controller copies them onto its slices). Keys under kubernetes.io and
	// k8s.io, and the labels the operator selects its objects by, are refused.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the Service's annotations, at most 32 of at
	// most 1024 bytes each.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 1024)",message="each Service annotation's value is at most 1024 bytes"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Memcached is a fleet of memcached pods behind a headless Service.
// Its name names the Deployment, the Service (a DNS-1035 label: at most 63
// characters, lower-case letters, digits and '-', starting with a letter)
// and the pods' instance label, so the schema holds it to that.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (at most 63 characters: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit): it names the fleet's Service"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.size,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=mc,categories=all
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the fleet.
	// +optional
	Spec MemcachedSpec `json:"spec,omitempty"`

	// status is the observed state of the fleet, written by the operator.
	// +optional
	Status MemcachedStatus `json:"status,omitempty"`
}

// MemcachedList is a list of Memcached.
// +kubebuilder:object:root=true
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}
