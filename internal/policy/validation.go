package policy

import (
	"fmt"
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// Limits are the bounds the operator's flags put on a Memcached.
type Limits struct {
	// MaxSize is the largest spec.size accepted (--max-size).
	MaxSize int32
}

// Warnings are legal but risky choices, returned to the client as admission warnings.
type Warnings []string

// reservedArgs are the memcached options that spec fields own, and options
// that would break the container (daemonizing exits PID 1; -u needs root).
var reservedArgs = map[string]string{
	"-p": "port", "--port": "port",
	"-m": "memoryLimitMB", "--memory-limit": "memoryLimitMB",
	"-c": "maxConnections", "--conn-limit": "maxConnections",
	"-t": "threads", "--threads": "threads",
	"-I": "maxItemSize", "--max-item-size": "maxItemSize",
	"-v": "verbosity", "-vv": "verbosity", "-vvv": "verbosity",
	"-d": "", "--daemon": "", "-u": "", "--user": "",
}

// ReservedPodLabels are the labels the operator selects its pods by; podLabels
// may not override them or the Deployment would lose its pods.
var ReservedPodLabels = []string{
	"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by",
}

// ValidateCreate checks a new, defaulted Memcached.
func ValidateCreate(mc *cachev1alpha1.Memcached, limits Limits) (field.ErrorList, Warnings) {
	spec := field.NewPath("spec")
	errs := ValidateSize(spec.Child("size"), mc.Spec.Size, nil, limits)
	errs = append(errs, validateSpec(spec, &mc.Spec)...)
	return errs, specWarnings(&mc.Spec)
}

// ValidateUpdate checks a change to a Memcached: everything ValidateCreate
// checks, plus the fields that cannot change in place.
func ValidateUpdate(oldMC, mc *cachev1alpha1.Memcached, limits Limits) (field.ErrorList, Warnings) {
	spec := field.NewPath("spec")
	errs := ValidateSize(spec.Child("size"), mc.Spec.Size, oldMC.Spec.Size, limits)
	errs = append(errs, validateSpec(spec, &mc.Spec)...)
	errs = append(errs, validateImmutable(spec, &oldMC.Spec, &mc.Spec)...)
	warnings := specWarnings(&mc.Spec)
	if restartsPods(&oldMC.Spec, &mc.Spec) {
		warnings = append(warnings, "this change replaces every memcached pod, one at a time; each new pod starts with an empty cache")
	}
	return errs, warnings
}

// ValidateSize bounds a size, from the object or from the scale subresource.
// A size above the limit is refused only when it changes, so that lowering
// --max-size never blocks unrelated edits of an existing fleet (ratcheting).
func ValidateSize(path *field.Path, size, oldSize *int32, limits Limits) field.ErrorList {
	if size == nil {
		return nil
	}
	var errs field.ErrorList
	switch {
	case *size < 0:
		errs = append(errs, field.Invalid(path, *size, "must be greater than or equal to 0"))
	case limits.MaxSize > 0 && *size > limits.MaxSize && (oldSize == nil || *oldSize != *size):
		errs = append(errs, field.Invalid(path, *size,
			fmt.Sprintf("must be less than or equal to %d, the operator's --max-size", limits.MaxSize)))
	}
	return errs
}

func validateSpec(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	if spec.Image != nil && strings.TrimSpace(*spec.Image) == "" {
		errs = append(errs, field.Required(path.Child("image"), "must name a memcached image"))
	}
	errs = append(errs, validateMemory(path, spec)...)
	errs = append(errs, validateExtraArgs(path.Child("extraArgs"), spec.ExtraArgs)...)
	for _, key := range ReservedPodLabels {
		if _, ok := spec.PodLabels[key]; ok {
			errs = append(errs, field.Forbidden(path.Child("podLabels").Key(key),
				"the operator selects its pods by this label; it cannot be overridden"))
		}
	}
	return errs
}

// validateMemory keeps memcached's settings consistent with each other and
// with the container: memcached refuses to start with an item size above half
// its memory, and a -m above the container limit ends in an OOM kill.
func validateMemory(path *field.Path, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	var itemBytes int64
	if spec.MaxItemSize != nil {
		b, err := ParseItemSize(*spec.MaxItemSize)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(path.Child("maxItemSize"), *spec.MaxItemSize, err.Error()))
		case b < 1<<10 || b > 1<<30:
			errs = append(errs, field.Invalid(path.Child("maxItemSize"), *spec.MaxItemSize, "must be between 1k and 1024m"))
		default:
			itemBytes = b
		}
	}
	if spec.MemoryLimitMB == nil {
		return errs
	}
	memBytes := int64(*spec.MemoryLimitMB) << 20
	if itemBytes > memBytes/2 {
		errs = append(errs, field.Invalid(path.Child("maxItemSize"), *spec.MaxItemSize,
			fmt.Sprintf("must be at most half of memoryLimitMB (%dMB): memcached refuses to start otherwise", *spec.MemoryLimitMB)))
	}
	if limit, ok := memoryLimit(spec.Resources); ok && memBytes > limit.Value() {
		errs = append(errs, field.Invalid(path.Child("memoryLimitMB"), *spec.MemoryLimitMB,
			fmt.Sprintf("must fit inside resources.limits.memory (%s), or the container is OOM-killed once the cache fills", limit.String())))
	}
	return errs
}

// ParseItemSize reads memcached's -I notation: bytes, or a number with a k or m suffix.
func ParseItemSize(s string) (int64, error) {
	mult := int64(1)
	num := s
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult, num = 1<<10, s[:n-1]
		case 'm', 'M':
			mult, num = 1<<20, s[:n-1]
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("must be a positive number of bytes, optionally followed by k or m")
	}
	return v * mult, nil
}

func validateExtraArgs(path *field.Path, args []string) field.ErrorList {
	var errs field.ErrorList
	for i, arg := range args {
		name, _, _ := strings.Cut(arg, "=")
		owner, reserved := reservedArgs[name]
		switch {
		case !reserved:
		case owner == "":
			errs = append(errs, field.Forbidden(path.Index(i), fmt.Sprintf("%s cannot run in a container", name)))
		default:
			errs = append(errs, field.Forbidden(path.Index(i), fmt.Sprintf("%s is set by spec.%s; set that field instead", name, owner)))
		}
	}
	return errs
}

func validateImmutable(path *field.Path, oldSpec, spec *cachev1alpha1.MemcachedSpec) field.ErrorList {
	var errs field.ErrorList
	if oldSpec.Port != nil && !apiequality.Semantic.DeepEqual(oldSpec.Port, spec.Port) {
		errs = append(errs, field.Invalid(path.Child("port"), spec.Port,
			"field is immutable: every client is configured with it; create a new Memcached with the new port and move clients to it"))
	}
	return errs
}

func specWarnings(spec *cachev1alpha1.MemcachedSpec) Warnings {
	var w Warnings
	if spec.Size != nil && *spec.Size == 0 {
		w = append(w, "spec.size is 0: no memcached pod will run")
	}
	if _, ok := memoryLimit(spec.Resources); !ok {
		w = append(w, "spec.resources.limits.memory is not set: a memcached pod may grow until the node evicts it")
	}
	if spec.Size != nil && *spec.Size == 1 {
		w = append(w, "spec.size is 1: every restart or node drain empties the whole cache")
	}
	return w
}

// restartsPods tells whether a change alters the pod template, which rolls
// every pod and so empties each one's cache in turn.
func restartsPods(oldSpec, spec *cachev1alpha1.MemcachedSpec) bool {
	o, n := oldSpec.DeepCopy(), spec.DeepCopy()
	for _, s := range []*cachev1alpha1.MemcachedSpec{o, n} {
		s.Size, s.PodDisruptionBudget = nil, nil
	}
	return !apiequality.Semantic.DeepEqual(o, n)
}
