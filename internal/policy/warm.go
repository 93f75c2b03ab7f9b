package policy

import (
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// WarmRestartWarning is the warning of an update that a fleet with warm
// restarts takes in place: memcached's image or command line alone.
const WarmRestartWarning = "this change restarts memcached in each pod in place, one pod at a time; each keeps its cache (spec.warmRestart)"

// WarmColdWarning begins the warning of an update taken in place that
// changes a setting memcached's memory file was made with: memcached
// refuses the saved cache, and the launcher copies it into a new file.
const WarmColdWarning = "this change restarts memcached in each pod in place, one pod at a time, and copies its cache into a memory file made with the new "

// WarmCopyNote ends WarmColdWarning and begins WarmResizeWarning's end:
// what a copy keeps, and when a pod has no room for it.
const WarmCopyNote = "items that no longer fit are dropped; a pod whose memory volume cannot hold the new item memory (twice what the pod was made with, plus 64 MiB) is replaced and starts with an empty cache"

// WarmResizeWarning is the warning of an update of a warm fleet's memory
// or resources: each pod is resized in place and keeps its cache.
const WarmResizeWarning = "this change resizes memcached in each pod in place, one pod at a time, and copies its cache into its new item memory; " + WarmCopyNote

// memoryFileOptions are the options memcached records with a memory file
// and compares on a warm restart: the item memory, the slab layout and CAS.
// memcached refuses a saved cache made under other values (extraArgs never
// hold -m or -I, which are fields).
var (
	memoryFileShorts   = []byte{'m', 'I', 'C', 'f', 'n'}
	memoryFileExtended = []string{"slab_chunk_max", "slab_sizes", "slab_reassign"}
)

// warmInPlace tells whether a fleet with warm restarts takes a change in
// place: one that touches the pods only through memcached's image, command
// line and resources.
func warmInPlace(oldSpec, spec *cachev1alpha1.MemcachedSpec) bool {
	o := oldSpec.DeepCopy()
	o.Image, o.MaxConnections, o.Threads, o.Verbosity, o.MaxItemSize, o.ExtraArgs, o.MemoryLimitMB, o.Resources =
		spec.Image, spec.MaxConnections, spec.Threads, spec.Verbosity, spec.MaxItemSize, spec.ExtraArgs, spec.MemoryLimitMB, spec.Resources
	return !restartsPods(o, spec)
}

// memoryFileChanges names the settings a change of a warm fleet alters that
// its memory file was made with.
func memoryFileChanges(oldSpec, spec *cachev1alpha1.MemcachedSpec) []string {
	var changed []string
	if ptr.Deref(oldSpec.MaxItemSize, "") != ptr.Deref(spec.MaxItemSize, "") {
		changed = append(changed, "maxItemSize")
	}
	before, after := MemoryFileSettings(oldSpec.ExtraArgs), MemoryFileSettings(spec.ExtraArgs)
	for _, name := range sortedKeys(before, after) {
		b, inBefore := before[name]
		a, inAfter := after[name]
		if inBefore != inAfter || b != a {
			changed = append(changed, "extraArgs "+name)
		}
	}
	return changed
}

// MemoryFileSettings are the values of the memoryFileOptions in a memcached
// command line, by name ("-m", "-o slab_chunk_max"); the last one counts,
// as for memcached. Two command lines with equal settings can share a
// memory file.
func MemoryFileSettings(args []string) map[string]string {
	opts, _ := ParseArgs(field.NewPath("extraArgs"), args)
	out := map[string]string{}
	for _, o := range opts {
		switch {
		case slices.Contains(memoryFileShorts, o.Short):
			out["-"+string(o.Short)] = o.Value
		case o.Short == 'o':
			for _, kv := range strings.Split(o.Value, ",") {
				k, v, _ := strings.Cut(kv, "=")
				if slices.Contains(memoryFileExtended, k) {
					out["-o "+k] = v
				}
			}
		}
	}
	return out
}

func sortedKeys(maps ...map[string]string) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// restartWarning is the warning of an update that changes the pods.
func restartWarning(oldSpec, spec *cachev1alpha1.MemcachedSpec) string {
	if !WarmRestartEnabled(oldSpec) || !WarmRestartEnabled(spec) || !warmInPlace(oldSpec, spec) {
		return RestartWarning
	}
	if !apiequality.Semantic.DeepEqual(oldSpec.MemoryLimitMB, spec.MemoryLimitMB) || !apiequality.Semantic.DeepEqual(oldSpec.Resources, spec.Resources) {
		return WarmResizeWarning
	}
	if changed := memoryFileChanges(oldSpec, spec); len(changed) > 0 {
		return WarmColdWarning + strings.Join(changed, ", ") + "; " + WarmCopyNote
	}
	return WarmRestartWarning
}
