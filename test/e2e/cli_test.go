//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The operator suite drives the cluster the way a user does: through the
// testbed's kubectl and helm wrappers, which set the kubeconfig themselves.

// cli runs one of the testbed's wrappers (kubectl, helm) and returns its
// combined output; stdin, when not empty, is piped in.
func cli(tool, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(testbedDir(), "bin", tool), args...)
	cmd.Dir = repoRoot()
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	GinkgoWriter.Printf("$ %s %s\n", tool, strings.Join(args, " "))
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s", tool, strings.Join(args, " "), err, out.String())
	}
	return out.String(), err
}

func kubectl(args ...string) (string, error) { return cli("kubectl", "", args...) }

// helm runs the testbed's Helm 3 wrapper, or the one E2E_HELM names
// (helm4: `make e2e E2E_HELM=helm4` runs the lifecycle specs with Helm 4).
func helm(args ...string) (string, error) { return cli(helmTool(), "", args...) }

func helmTool() string {
	if h := os.Getenv("E2E_HELM"); h != "" {
		return h
	}
	return "helm"
}

// kubectlApply applies a manifest given inline, as `kubectl apply -f -`.
func kubectlApply(manifest string, args ...string) (string, error) {
	return cli("kubectl", manifest, append([]string{"apply", "-f", "-"}, args...)...)
}

func mustRun(out string, err error) string {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
	return out
}

func repoRoot() string {
	wd, err := os.Getwd()
	Expect(err).NotTo(HaveOccurred())
	return filepath.Join(wd, "..", "..")
}

// restrictedContext passes the "restricted" Pod Security Standard.
func restrictedContext(uid int64) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To(uid),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// probe runs the testbed's probe image once (`probe MODE ARG`) in ns and
// returns its log when it exits successfully.
func probe(ctx context.Context, ns, name, mode, arg string) string {
	GinkgoHelper()
	return probeArgs(ctx, ns, name, mode, arg)
}

// probeArgs is probe with any arguments (`probe load NAME PORT RATE DURATION`).
func probeArgs(ctx context.Context, ns, name string, args ...string) string {
	GinkgoHelper()
	return probeLog(ctx, startProbe(ctx, ns, name, nil, args...))
}

// startProbe starts the probe image with args in a pod of ns and returns
// the pod without waiting (a load that runs while a spec does something
// else); probeLog waits for it. shape, when not nil, adjusts the pod's spec
// (keep it off a node about to be drained). The pod is deleted when the
// spec ends.
func startProbe(ctx context.Context, ns, name string, shape func(*corev1.PodSpec), args ...string) *corev1.Pod {
	GinkgoHelper()
	pod := probePod(ns, name, shape, args...)
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(context.Background(), pod) })
	return pod
}

// probePod is the pod startProbe creates; a suite whose load outlives one
// spec creates it itself and deletes it with its namespace.
func probePod(ns, name string, shape func(*corev1.PodSpec), args ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken:  ptr.To(false),
			Containers: []corev1.Container{{
				Name: "probe", Image: images["PROBE_IMAGE"], ImagePullPolicy: corev1.PullIfNotPresent,
				Args: args, SecurityContext: restrictedContext(65532),
			}},
		},
	}
	if shape != nil {
		shape(&pod.Spec)
	}
	return pod
}

// stopProbe ends a probe's load now: a load covers the steps of its spec,
// however long they take, and fails the spec when it ended before them.
func stopProbe(ctx context.Context, pod *corev1.Pod) {
	GinkgoHelper()
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "the load of %s ended before the steps it covers", pod.Name)
	// The signalled load exits at once, and its container with it, which may
	// end this exec'd command first (exit 137): what counts is that the load
	// then ends, with its report (probeLog).
	_, _ = kubectl("exec", "-n", pod.Namespace, pod.Name, "--", "/probe", "stop", "1")
	Eventually(func(g Gomega) corev1.PodPhase {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		return pod.Status.Phase
	}).WithTimeout(time.Minute).ShouldNot(Equal(corev1.PodRunning), "the load of %s ignored its stop", pod.Name)
}

// probeLog waits until a probe pod has succeeded and returns its log.
func probeLog(ctx context.Context, pod *corev1.Pod) string {
	GinkgoHelper()
	Eventually(func(g Gomega) corev1.PodPhase {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		if pod.Status.Phase == corev1.PodFailed {
			out, _ := kubectl("logs", "-n", pod.Namespace, pod.Name)
			StopTrying("probe pod " + pod.Name + " failed:\n" + out).Now()
		}
		return pod.Status.Phase
	}).WithTimeout(12*time.Minute).Should(Equal(corev1.PodSucceeded), "a probe runs at most 10 minutes")
	return mustRun(kubectl("logs", "-n", pod.Namespace, pod.Name))
}

// dumpOnFailure prints what a person debugging a failed spec looks at first.
func dumpOnFailure(namespaces ...string) {
	if !CurrentSpecReport().Failed() {
		return
	}
	for _, args := range [][]string{
		{"get", "pods,deployments,memcacheds,certificates", "-A", "-o", "wide"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"logs", "-n", operatorNamespace, "-l", "app.kubernetes.io/name=memcached-operator", "--tail=200", "--prefix"},
	} {
		out, _ := kubectl(args...)
		AddReportEntry("kubectl "+strings.Join(args, " "), out)
	}
	for _, ns := range namespaces {
		out, _ := kubectl("get", "memcached,deploy,svc,pdb", "-n", ns, "-o", "yaml")
		AddReportEntry("objects in "+ns, out)
	}
}
