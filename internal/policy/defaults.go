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

	// memoryHeadroomPercent leaves room inside the container limit for
	// memcached's connection buffers and hash table, which -m does not count.
	memoryHeadroomPercent = 90
	maxDerivedThreads     = 64
)

// Config is what defaulting takes from the operator's flags.
type Config struct {
	// DefaultImage is used when spec.image is empty.
	DefaultImage string
}

// Default fills every field the user left empty, and only those, so that it is
// idempotent and never overrides a user's choice. Settings that a container
// limit bounds are derived from it: item memory from the memory limit, worker
// threads from the CPU limit.
func Default(spec *cachev1alpha1.MemcachedSpec, cfg Config) {
	setIfNil(&spec.Size, DefaultSize)
	if spec.Image == nil && cfg.DefaultImage != "" {
		spec.Image = ptr.To(cfg.DefaultImage)
	}
	setIfNil(&spec.ImagePullPolicy, DefaultPullPolicy)
	setIfNil(&spec.Port, DefaultPort)
	setIfNil(&spec.MemoryLimitMB, derivedMemoryLimitMB(spec.Resources))
	setIfNil(&spec.MaxConnections, DefaultMaxConnections)
	setIfNil(&spec.Threads, derivedThreads(spec.Resources))
	setIfNil(&spec.MaxItemSize, DefaultMaxItemSize)
	setIfNil(&spec.Verbosity, DefaultVerbosity)
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
	return int32(max(8, min(mb, 1<<20)))
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
