package memcached

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/controller/desired"
)

// +kubebuilder:rbac:groups=core,resources=pods,verbs=delete
// +kubebuilder:rbac:groups=core,resources=pods/resize,verbs=patch

// rollWarm takes the next step of the rollout of a fleet with warm
// restarts, whose StatefulSet leaves its pods alone (OnDelete): an image, a
// command line or memcached's resources changed in place, where the pod
// keeps its memory file, or a pod replaced, one at a time
// (desired.NextWarmStep). The pod's events bring the
// pass that takes the step after.
func (r *Reconciler) rollWarm(ctx context.Context, s *scope, set *appsv1.StatefulSet) error {
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.memcached.Namespace), client.MatchingFields{podFleetIndex: s.memcached.Name}); err != nil {
		return fmt.Errorf("listing pods of Memcached %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	var allowed *int32
	pdb := &policyv1.PodDisruptionBudget{}
	switch err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.memcached), pdb); {
	case err == nil && metav1.IsControlledBy(pdb, s.memcached):
		allowed = &pdb.Status.DisruptionsAllowed
	case err != nil && !apierrors.IsNotFound(err):
		return fmt.Errorf("reading PodDisruptionBudget %s: %w", client.ObjectKeyFromObject(s.memcached), err)
	}
	step := desired.NextWarmStep(set, list.Items, allowed)
	s.restarting, s.rolloutWait = step.Restarting, step.Wait
	if step.Pod == "" {
		return nil
	}
	var pod *corev1.Pod
	for i := range list.Items {
		if list.Items[i].Name == step.Pod {
			pod = &list.Items[i]
		}
	}
	log := ctrl.LoggerFrom(ctx).WithValues("pod", step.Pod)
	if !step.InPlace {
		log.Info("Replacing a pod of a fleet with warm restarts: its template changed in more than memcached's image, so it starts with an empty cache")
		return r.replaceWarmPod(ctx, pod)
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	if step.Resize != nil {
		log.Info("Resizing memcached in place; the pod keeps its cache", "limits", step.Resize.Limits, "requests", step.Resize.Requests)
		// Both lists whole: a list the template no longer has is removed
		// (null), not kept by the merge.
		resources := map[string]any{"limits": nil, "requests": nil}
		if len(step.Resize.Limits) > 0 {
			resources["limits"] = step.Resize.Limits
		}
		if len(step.Resize.Requests) > 0 {
			resources["requests"] = step.Resize.Requests
		}
		patch, err := json.Marshal(map[string]any{
			"spec": map[string]any{"containers": []map[string]any{{"name": desired.MemcachedContainer, "resources": resources}}},
		})
		if err != nil {
			return err
		}
		switch err := r.Client.SubResource("resize").Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, patch)); {
		case apierrors.IsInvalid(err):
			// A resize may not remove a limit or change the pod's QoS class.
			log.Info("The API server refuses to resize the pod in place: replacing it, so it starts with an empty cache", "reason", err.Error())
			return r.replaceWarmPod(ctx, pod)
		case client.IgnoreNotFound(err) != nil:
			return fmt.Errorf("resizing pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		// The pass after the kubelet's resize relabels the pod, or takes
		// the step left.
		return nil
	}
	log.Info("Changing memcached in place; the pod keeps its cache", "image", step.Image, "newCommandLine", step.Args != "", "restart", step.Restart)
	meta := map[string]any{"resourceVersion": pod.ResourceVersion}
	if !step.Partial {
		meta["labels"] = map[string]string{appsv1.ControllerRevisionHashLabelKey: step.Revision}
	}
	annotations := map[string]string{}
	if step.Args != "" {
		annotations[desired.ArgsAnnotation] = step.Args
	}
	if step.Restart {
		annotations[desired.RestartsAnnotation] = strconv.Itoa(int(step.Restarts))
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": meta,
		"spec":     map[string]any{"containers": []map[string]string{{"name": desired.MemcachedContainer, "image": step.Image}}},
	})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, patch)); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("changing pod %s/%s in place: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// replaceWarmPod deletes a pod of a warm fleet, as it was read, for its
// StatefulSet to make it again from the current template.
func (r *Reconciler) replaceWarmPod(ctx context.Context, pod *corev1.Pod) error {
	err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("replacing pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
