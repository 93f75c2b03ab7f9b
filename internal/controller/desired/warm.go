package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
)

// The pieces of a pod with warm restarts: memcached's memory file on a
// memory-backed volume that outlives its container, and the launcher that
// an init container copies from the operator image beside it.
const (
	memoryVolumeName   = "memory-file"
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

// TemplateAnnotation is the annotation of a warm fleet's pods that names
// their template less memcached's image and command line: a pod whose value
// is the current template's differs from it in those alone, which the
// operator then changes in place.
const TemplateAnnotation = "memcached.cache.example.com/pod-template"

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
			// The file is -m megabytes, its metadata a few kilobytes.
			WithSizeLimit(resource.MustParse(strconv.Itoa(int(*spec.MemoryLimitMB)+1)+"Mi"))),
		corev1ac.Volume().WithName(launcherVolumeName).WithEmptyDir(corev1ac.EmptyDirVolumeSource().
			WithSizeLimit(resource.MustParse("64Mi"))))
	pod.WithInitContainers(corev1ac.Container().
		WithName(LauncherInstallContainerName).
		WithImage(ptr.Deref(spec.WarmRestart.LauncherImage, "")).
		WithImagePullPolicy(ptr.Deref(spec.ImagePullPolicy, corev1.PullIfNotPresent)).
		WithCommand("/memcached-launcher", "--install="+launcherPath).
		WithVolumeMounts(corev1ac.VolumeMount().WithName(launcherVolumeName).WithMountPath(launcherMountPath)).
		WithResources(resources(&reloaderResources)).
		WithSecurityContext(restrictedContainer()))
	for i := range pod.Containers {
		if c := &pod.Containers[i]; *c.Name == containerName {
			c.Args = nil
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
	tpl.WithAnnotations(map[string]string{TemplateAnnotation: templateHash(tpl)})
}

// templateHash names a pod template less memcached's image and command line.
func templateHash(tpl *corev1ac.PodTemplateSpecApplyConfiguration) string {
	t := &corev1.PodTemplateSpec{}
	raw, err := json.Marshal(tpl)
	if err == nil {
		err = json.Unmarshal(raw, t)
	}
	if err != nil {
		panic("a pod template that does not encode: " + err.Error())
	}
	delete(t.Annotations, TemplateAnnotation)
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
	raw, _ = json.Marshal(t)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// MemcachedContainer is the name of the memcached container of a fleet's pods.
const MemcachedContainer = containerName
