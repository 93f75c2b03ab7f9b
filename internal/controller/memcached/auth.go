package memcached

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/policy"
)

// The operator never reads Secrets: whether the auth Secret exists is
// learnt from the fleet's pods, which it already watches. The auth-check
// init container takes the auth file's key as an environment variable
// (authPresentEnv), so the kubelet refuses to create it while the Secret or
// its key is missing and says so in the container's status
// (CreateContainerConfigError), where the pod cache keeps it. The volume is
// optional so that this check, not a mount that waits without a word, is
// what holds a new pod back.

// authPresentEnv is the auth check's reference to the auth Secret's key:
// the kubelet's resolving of it is the point.
const authPresentEnv = "AUTH_SECRET_REQUIRED"

// authState is what the fleet's pods say of its auth Secret.
type authState struct {
	// blocked counts the pods the kubelet cannot start for want of the
	// Secret or its key; message is its word on the first of them by name.
	blocked int
	message string
	// mounted: a pod of the fleet is ready, so it started with the file.
	mounted bool
}

// observeAuth reads the fleet's pods for what they say of its auth Secret.
func observeAuth(pods []corev1.Pod) *authState {
	a := &authState{}
	first := ""
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if msg := authBlocked(p); msg != "" {
			a.blocked++
			if first == "" || p.Name < first {
				first, a.message = p.Name, p.Name+": "+msg
			}
		}
		a.mounted = a.mounted || podReady(p)
	}
	return a
}

// authBlocked says why a pod's auth check holds memcached back: the
// kubelet's message while it cannot create the check for want of the Secret
// or its key, or the check's own word on a file memcached would refuse.
// "" when nothing holds the pod back.
func authBlocked(p *corev1.Pod) string {
	c := authCheckStatus(p)
	switch {
	case c == nil || c.State.Terminated != nil || c.State.Running != nil:
		return ""
	case c.State.Waiting != nil && c.State.Waiting.Reason == reasonCreateContainerConfigError:
		return c.State.Waiting.Message
	case c.LastTerminationState.Terminated != nil && c.LastTerminationState.Terminated.ExitCode != 0:
		return "the auth file: " + c.LastTerminationState.Terminated.Message
	}
	return ""
}

func authCheckStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.InitContainerStatuses {
		if c := &p.Status.InitContainerStatuses[i]; c.Name == authCheckContainerName {
			return c
		}
	}
	return nil
}

// reasonCreateContainerConfigError is the kubelet's waiting reason for a
// container whose environment or mounts cannot be resolved.
const reasonCreateContainerConfigError = "CreateContainerConfigError"

// authMissingMessage tells the user what the pods said and what to do.
func authMissingMessage(spec *cachev1alpha1.MemcachedSpec, a *AuthObservation) string {
	return "the kubelet cannot start memcached in " + a.Message + ": create Secret " + spec.Auth.SecretRef.Name +
		" with the auth file under key " + ptr.Deref(spec.Auth.SecretRef.Key, policy.DefaultAuthSecretKey) + "; pods that already serve keep serving"
}
