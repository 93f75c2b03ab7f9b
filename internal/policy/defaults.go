package policy

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// Defaults that do not depend on the rest of the spec.
const (
	DefaultSize           int32 = 1
	DefaultPort           int32 = 11211
	DefaultMemoryLimitMB  int32 = 64
	DefaultMaxConnections int32 = 1024
	DefaultThreads        int32 = 4
	DefaultMaxItemSize          = "1m"
	DefaultVerbosity      int32 = 0
	DefaultPullPolicy           = corev1.PullIfNotPresent
	// DefaultNodeLossTolerationSeconds replaces a lost node's cache pods
	// after 30 s rather than Kubernetes' 300 s.
	DefaultNodeLossTolerationSeconds int64 = 30
	// DefaultAuthSecretKey is the key of spec.auth's Secret that holds the
	// auth file when secretRef.key is empty.
	DefaultAuthSecretKey = "auth"
	// TLSLoopbackPort is the listener without TLS that a TLS fleet's pods
	// keep on 127.0.0.1 for the exporter and the reloader: only processes
	// inside the pod's own network namespace can reach it.
	TLSLoopbackPort int32 = 11299
	// ExporterPort is where the exporter sidecar serves metrics, in the
	// pod's network namespace.
	ExporterPort int32 = 9150
	// IssuerKind and ClusterIssuerKind are the cert-manager issuer kinds
	// spec.tls.issuerRef may name.
	IssuerKind        = "Issuer"
	ClusterIssuerKind = "ClusterIssuer"
	// CertManagerGroup is the API group of cert-manager's own issuers.
	CertManagerGroup = "cert-manager.io"

	// memoryHeadroomPercent leaves room inside the container limit for
	// memcached's connection buffers and hash table, which -m does not count.
	memoryHeadroomPercent = 90
	// MinMemoryLimitMB is the least item memory the schema allows.
	MinMemoryLimitMB  = 8
	maxDerivedThreads = 64
)

// Config is what defaulting takes from the operator's flags.
type Config struct {
	// DefaultImage is used when spec.image is empty.
	DefaultImage string
	// ExporterImage is used when the exporter is enabled without an image.
	ExporterImage string
	// AppArmorProfile is pinned on new fleets that set none ("": none).
	AppArmorProfile corev1.AppArmorProfileType
	// PlatformAssignsUIDs leaves the UID of fleets that set no
	// spec.runAsUser to the platform (--platform-assigns-uids). Resolved on
	// every pass, not pinned: changing it replaces those fleets' pods.
	PlatformAssignsUIDs bool
}

// DefaultRunAsUser is the UID and GID of a fleet's pods that set no
// spec.runAsUser: the memcached user of the upstream image.
const DefaultRunAsUser int64 = 11211

// ExporterEnabled tells whether the fleet's pods run the exporter sidecar.
func ExporterEnabled(spec *cachev1alpha1.MemcachedSpec) bool {
	return spec.Monitoring != nil && spec.Monitoring.Exporter != nil && ptr.Deref(spec.Monitoring.Exporter.Enabled, false)
}

// ServiceMonitorEnabled tells whether the fleet asks for a ServiceMonitor.
func ServiceMonitorEnabled(spec *cachev1alpha1.MemcachedSpec) bool {
	return spec.Monitoring != nil && spec.Monitoring.ServiceMonitor != nil && ptr.Deref(spec.Monitoring.ServiceMonitor.Enabled, false)
}

// defaultExporterResources keep the sidecar small: it holds one connection
// per scrape and no state.
var defaultExporterResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
}

// Default fills the fields a user left empty with values that depend on
// nothing else, and only those, so that it is idempotent and never overrides
// a user's choice. The images (memcached's, and the exporter's once it is
// enabled) are pinned here, at admission: an operator upgrade that changes
// --default-image or --exporter-image then never rolls existing fleets.
// memoryLimitMB and threads are left empty on purpose: they follow the
// container's limits, so Resolve derives them each time pods are built.
func Default(spec *cachev1alpha1.MemcachedSpec, cfg Config) {
	setIfNil(&spec.Size, DefaultSize)
	setIfNil(&spec.Workload, cachev1alpha1.WorkloadDeployment)
	if spec.Image == nil && cfg.DefaultImage != "" {
		spec.Image = ptr.To(cfg.DefaultImage)
	}
	setIfNil(&spec.ImagePullPolicy, DefaultPullPolicy)
	setIfNil(&spec.Port, DefaultPort)
	setIfNil(&spec.MaxConnections, DefaultMaxConnections)
	setIfNil(&spec.MaxItemSize, DefaultMaxItemSize)
	setIfNil(&spec.Verbosity, DefaultVerbosity)
	if ExporterEnabled(spec) && spec.Monitoring.Exporter.Image == nil && cfg.ExporterImage != "" {
		spec.Monitoring.Exporter.Image = ptr.To(cfg.ExporterImage)
	}
	if a := spec.Auth; a != nil {
		setIfNil(&a.SecretRef.Key, DefaultAuthSecretKey)
		// The operator image holds the reloader too.
		if a.ReloaderImage == nil && cfg.ExporterImage != "" {
			a.ReloaderImage = ptr.To(cfg.ExporterImage)
		}
	}
	if w := spec.WarmRestart; w != nil && w.Enabled && w.LauncherImage == nil && cfg.ExporterImage != "" {
		w.LauncherImage = ptr.To(cfg.ExporterImage)
	}
	if t := spec.TLS; t != nil {
		setIfNil(&t.ClientAuth, cachev1alpha1.TLSClientAuthNone)
		if t.IssuerRef != nil {
			setIfNil(&t.IssuerRef.Kind, IssuerKind)
			setIfNil(&t.IssuerRef.Group, CertManagerGroup)
		}
		if t.Enabled && t.ReloaderImage == nil && cfg.ExporterImage != "" {
			t.ReloaderImage = ptr.To(cfg.ExporterImage)
		}
	}
}

// DefaultCreate is Default for a new fleet: it also sets the fields whose
// default must not reach fleets that exist already, because it changes the
// pod template and would replace every pod of every fleet when an operator
// upgrade brings it (nodeLossTolerationSeconds). Resolve leaves them as
// stored.
func DefaultCreate(spec *cachev1alpha1.MemcachedSpec, cfg Config) {
	Default(spec, cfg)
	setIfNil(&spec.NodeLossTolerationSeconds, DefaultNodeLossTolerationSeconds)
	// Only on creation: set on an update, it would roll a fleet's pods for
	// an unrelated edit.
	if spec.AppArmorProfile == nil && cfg.AppArmorProfile != "" {
		spec.AppArmorProfile = ptr.To(cfg.AppArmorProfile)
	}
}

// Resolve is the spec the pods are built from: Default's values, then item
// memory derived from the memory limit and worker threads from the CPU limit
// where the user set neither. It works on a copy and leaves spec alone.
func Resolve(spec *cachev1alpha1.MemcachedSpec, cfg Config) *cachev1alpha1.MemcachedSpec {
	out := spec.DeepCopy()
	Default(out, cfg)
	setIfNil(&out.MemoryLimitMB, derivedMemoryLimitMB(out.Resources))
	setIfNil(&out.Threads, derivedThreads(out.Resources))
	if !cfg.PlatformAssignsUIDs {
		setIfNil(&out.RunAsUser, DefaultRunAsUser)
	}
	if ExporterEnabled(out) && out.Monitoring.Exporter.Resources == nil {
		out.Monitoring.Exporter.Resources = defaultExporterResources.DeepCopy()
	}
	return out
}

func setIfNil[T any](field **T, value T) {
	if *field == nil {
		*field = ptr.To(value)
	}
}

func derivedMemoryLimitMB(res *corev1.ResourceRequirements) int32 {
	limit, ok := memoryLimit(res)
	if !ok {
		return DefaultMemoryLimitMB
	}
	mb := limit.Value() / (1 << 20) * memoryHeadroomPercent / 100
	return int32(max(MinMemoryLimitMB, min(mb, 1<<20)))
}

func derivedThreads(res *corev1.ResourceRequirements) int32 {
	if res == nil {
		return DefaultThreads
	}
	cpu, ok := res.Limits[corev1.ResourceCPU]
	if !ok || cpu.IsZero() {
		return DefaultThreads
	}
	cores := math.Ceil(float64(cpu.MilliValue()) / 1000)
	return int32(max(1, min(cores, maxDerivedThreads)))
}

// memoryLimit is the container's memory limit, if it has a non-zero one.
func memoryLimit(res *corev1.ResourceRequirements) (resource.Quantity, bool) {
	if res == nil {
		return resource.Quantity{}, false
	}
	limit, ok := res.Limits[corev1.ResourceMemory]
	return limit, ok && !limit.IsZero()
}

// WarmRestartEnabled tells whether the fleet's pods keep their cache
// through restarts of memcached.
func WarmRestartEnabled(spec *cachev1alpha1.MemcachedSpec) bool {
	return spec.WarmRestart != nil && spec.WarmRestart.Enabled
}

// TLSEnabled tells whether the fleet serves TLS.
func TLSEnabled(spec *cachev1alpha1.MemcachedSpec) bool {
	return spec.TLS != nil && spec.TLS.Enabled
}

// ReloaderImage is the image of the one sidecar that reloads both the auth
// file and the certificate: spec.auth's when auth is set, else spec.tls's.
func ReloaderImage(spec *cachev1alpha1.MemcachedSpec) string {
	if spec.Auth != nil {
		return ptr.Deref(spec.Auth.ReloaderImage, "")
	}
	if TLSEnabled(spec) {
		return ptr.Deref(spec.TLS.ReloaderImage, "")
	}
	return ""
}
