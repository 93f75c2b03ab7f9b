package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// The pieces of a pod with warm restarts: memcached's memory file on a
// memory-backed volume that outlives its container, and the launcher that
// an init container copies from the operator image beside it.
const (
	memoryVolumeName   = MemoryVolumeName
	memoryMountPath    = "/var/lib/memcached"
	memoryFile         = memoryMountPath + "/memory"
	launcherVolumeName = "launcher"
	launcherMountPath  = "/opt/memcached-operator"
	launcherPath       = launcherMountPath + "/memcached-launcher"
	argsVolumeName     = "memcached-args"
	argsMountPath      = "/etc/memcached-args"
	argsFile           = argsMountPath + "/args"
	// LauncherInstallContainerName is the init container that copies the launcher.
	LauncherInstallContainerName = "install-launcher"
)

// A warm pod's memcached gets an hour to start: a copy of a large cache
// into a new memory file takes minutes.
const (
	startupProbePeriod   = 5
	startupProbeFailures = 720
)

// TemplateAnnotation is the annotation of a warm fleet's pods that names
// their template less what the operator changes in place: memcached's
// image, command line and resources, and the sizes that follow its memory
// (the memory file's volume, the launcher's headroom). A pod whose value is
// the current template's differs from it in those alone.
const TemplateAnnotation = "memcached.cache.example.com/pod-template"

// LegacyTemplateAnnotation names the template as operators before in-place
// resizes named it (less image and command line only), with the volume and
// launcher sizes of then: pods those operators made match it when nothing
// but the operator changed, and are not replaced by its upgrade.
const LegacyTemplateAnnotation = "memcached.cache.example.com/pod-template-v1"

// ArgsAnnotation holds memcached's command line, a JSON array, in a warm
// fleet's pods: the launcher reads it through a downward API file, so that
// a change of options is a change of the pod, made in place, and not a new
// pod with an empty cache.
const ArgsAnnotation = "memcached.cache.example.com/args"

// warmPod adds the memory file and the launcher to a pod of a fleet with
// warm restarts, and the annotation that tells which of its pods can take
// a new template in place.
func warmPod(tpl *corev1ac.PodTemplateSpecApplyConfiguration, spec *cachev1alpha1.MemcachedSpec) {
	pod := tpl.Spec
	pod.WithVolumes(
		// apiVersion as the API server defaults it: the selector is kept
		// whole, so what the operator reads back of its own apply has it,
		// and a selector without it would differ on every pass.
		corev1ac.Volume().WithName(argsVolumeName).WithDownwardAPI(corev1ac.DownwardAPIVolumeSource().
			WithItems(corev1ac.DownwardAPIVolumeFile().WithPath("args").
				WithFieldRef(corev1ac.ObjectFieldSelector().WithAPIVersion("v1").WithFieldPath("metadata.annotations['"+ArgsAnnotation+"']")))),
		corev1ac.Volume().WithName(memoryVolumeName).WithEmptyDir(corev1ac.EmptyDirVolumeSource().
			WithMedium(corev1.StorageMediumMemory).
			WithSizeLimit(MemoryVolumeSize(*spec.MemoryLimitMB))),
		corev1ac.Volume().WithName(launcherVolumeName).WithEmptyDir(corev1ac.EmptyDirVolumeSource().
			WithSizeLimit(resource.MustParse("64Mi"))))
	pod.WithInitContainers(corev1ac.Container().
		WithName(LauncherInstallContainerName).
		WithImage(ptr.Deref(spec.WarmRestart.LauncherImage, "")).
		WithImagePullPolicy(ptr.Deref(spec.ImagePullPolicy, corev1.PullIfNotPresent)).
		WithCommand("/memcached-launcher", "--install="+launcherPath).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(launcherVolumeName).WithMountPath(launcherMountPath)).
		WithResources(resources(launcherResources(pod.Containers, *spec.MemoryLimitMB))).
		WithSecurityContext(restrictedContainer()))
	for i := range pod.Containers {
		if c := &pod.Containers[i]; *c.Name == containerName {
			c.Args = nil
			// memcached listens only once the launcher has restored or
			// copied the cache, which for a large one outlasts the liveness
			// probe's patience: the startup probe holds it off meanwhile.
			c.WithStartupProbe(corev1ac.Probe().
				WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString(portName))).
				WithPeriodSeconds(startupProbePeriod).WithFailureThreshold(startupProbeFailures))
			c.WithCommand(launcherPath, "--memory-file="+memoryFile, "--args-file="+argsFile).
				WithVolumeMounts(
					corev1ac.VolumeMount().WithName(memoryVolumeName).WithMountPath(memoryMountPath),
					corev1ac.VolumeMount().WithName(launcherVolumeName).WithMountPath(launcherMountPath).WithReadOnly(true),
					corev1ac.VolumeMount().WithName(argsVolumeName).WithMountPath(argsMountPath).WithReadOnly(true))
		}
	}
	args, err := json.Marshal(Args(spec))
	if err != nil {
		panic("memcached's arguments do not encode: " + err.Error())
	}
	tpl.WithAnnotations(map[string]string{ArgsAnnotation: string(args)})
	current, legacy := templateHashes(tpl, *spec.MemoryLimitMB)
	tpl.WithAnnotations(map[string]string{TemplateAnnotation: current, LegacyTemplateAnnotation: legacy})
}

// MemoryVolumeSize is the memory-backed volume of a warm pod made for -m
// megabytes: room for the memory file and a copy of it, so that a change
// of item memory can copy the cache into a new file in the same pod. The
// volume's size cannot change once the pod exists.
func MemoryVolumeSize(memoryMB int32) resource.Quantity {
	return resource.MustParse(strconv.Itoa(int(memoryMB)+1+copyRoomMB(memoryMB)) + "Mi")
}

// preallocMB is what memcached touches of a new memory file when it starts:
// a slab page (1 MiB) for each size of item, about 40 with the default
// growth factor and item size.
const preallocMB = 64

// copyRoomMB is the room a copy of the cache takes beside the memory file:
// a second file, holding as much, and the pages memcached preallocates on
// it.
func copyRoomMB(memoryMB int32) int {
	return int(memoryMB) + 1 + preallocMB
}

// RoomFor tells whether a pod whose memory volume has the given size can
// take a memory file of toMB megabytes in place: the file alone, once
// filled. A copy into it takes what room is left beside the old file
// (the launcher stops when the volume is full), which is all of a cache
// of the item memory the pod was made with.
func RoomFor(volume resource.Quantity, toMB int32) bool {
	return int64(toMB)+1 <= volume.Value()>>20
}

// launcherResources are the init container's: tiny requests, and, when
// every container has a memory limit, a memory limit that raises the pod's
// (the larger of its containers' sum and any init container's) by the
// room of a copy. The pod's memory-backed volume is no larger than the pod's
// limit when the pod starts, and a copy of the cache needs the room. It
// reserves nothing on the node: the scheduler counts requests.
func launcherResources(containers []corev1ac.ContainerApplyConfiguration, memoryMB int32) *corev1.ResourceRequirements {
	var sum resource.Quantity
	for _, c := range containers {
		if c.Resources == nil || c.Resources.Limits == nil {
			return &reloaderResources
		}
		m, ok := (*c.Resources.Limits)[corev1.ResourceMemory]
		if !ok || m.IsZero() {
			return &reloaderResources
		}
		sum.Add(m)
	}
	sum.Add(resource.MustParse(strconv.Itoa(copyRoomMB(memoryMB)) + "Mi"))
	r := reloaderResources.DeepCopy()
	r.Limits = corev1.ResourceList{corev1.ResourceMemory: sum}
	return r
}

// templateHashes name a pod template less what the operator changes in
// place (current), and as operators before in-place resizes named it
// (legacy): less image and command line, with the volume and launcher
// sizes of then.
func templateHashes(tpl *corev1ac.PodTemplateSpecApplyConfiguration, memoryMB int32) (current, legacy string) {
	t := &corev1.PodTemplateSpec{}
	raw, err := json.Marshal(tpl)
	if err == nil {
		err = json.Unmarshal(raw, t)
	}
	if err != nil {
		panic("a pod template that does not encode: " + err.Error())
	}
	delete(t.Annotations, TemplateAnnotation)
	delete(t.Annotations, LegacyTemplateAnnotation)
	delete(t.Annotations, ArgsAnnotation)
	// Without the fieldRef's apiVersion, which the API server fills in
	// anyway: operators that set it and operators that did not name the
	// same template, so an upgrade replaces no pod.
	for _, v := range t.Spec.Volumes {
		if v.DownwardAPI != nil {
			for i := range v.DownwardAPI.Items {
				if f := v.DownwardAPI.Items[i].FieldRef; f != nil && f.APIVersion == "v1" {
					f.APIVersion = ""
				}
			}
		}
	}
	for i := range t.Spec.Containers {
		if t.Spec.Containers[i].Name == containerName {
			t.Spec.Containers[i].Image = ""
		}
	}
	sizes := func(volume *resource.Quantity, launcher corev1.ResourceRequirements) {
		for i := range t.Spec.Volumes {
			if v := &t.Spec.Volumes[i]; v.Name == memoryVolumeName {
				v.EmptyDir.SizeLimit = volume
			}
		}
		for i := range t.Spec.InitContainers {
			if c := &t.Spec.InitContainers[i]; c.Name == LauncherInstallContainerName {
				c.Resources = launcher
			}
		}
	}
	sizes(ptr.To(resource.MustParse(strconv.Itoa(int(memoryMB)+1)+"Mi")), *reloaderResources.DeepCopy())
	var memcached *corev1.Container
	for i := range t.Spec.Containers {
		if t.Spec.Containers[i].Name == containerName {
			memcached = &t.Spec.Containers[i]
		}
	}
	// Nor had they the startup probe.
	startup := memcached.StartupProbe
	memcached.StartupProbe = nil
	legacy = hashOf(t)
	memcached.StartupProbe = startup
	sizes(nil, corev1.ResourceRequirements{})
	memcached.Resources = corev1.ResourceRequirements{}
	return hashOf(t), legacy
}

func hashOf(t *corev1.PodTemplateSpec) string {
	raw, _ := json.Marshal(t)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// MemoryVolumeName is the memory-backed volume of a warm pod that holds
// memcached's memory file.
const MemoryVolumeName = "memory-file"

// MemcachedContainer is the name of the memcached container of a fleet's pods.
const MemcachedContainer = containerName
