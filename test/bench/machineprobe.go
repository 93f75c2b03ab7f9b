package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// probePod is the object the machine probe decodes and encodes: a fleet's
// pod as the API server stores it, give or take.
var probePod = corev1.Pod{
	ObjectMeta: metav1.ObjectMeta{
		Name: "cache-0001-7d9c6b8f5d-x2v4q", Namespace: "bench-op", UID: "0d7e4c1a-5b7e-4f4e-9d53-3f1f7c9a2b10",
		Labels:          map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "cache-0001", "pod-template-hash": "7d9c6b8f5d"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "cache-0001-7d9c6b8f5d", UID: "6f1d2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b"}},
	},
	Spec: corev1.PodSpec{
		NodeName: "kwok-node-7",
		Containers: []corev1.Container{{
			Name: "memcached", Image: "memcached:1.6.38", Args: []string{"-m", "64", "-c", "1024", "-t", "4"},
			Ports: []corev1.ContainerPort{{Name: "memcache", ContainerPort: 11211, Protocol: corev1.ProtocolTCP}},
		}},
	},
	Status: corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.3.17",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}},
	},
}

// machineSpeed is how long this machine takes, on one core, to decode and
// encode a pod's JSON (the best of five rounds of 2,000): a reading of the
// machine's own speed, which on a shared VM moves over a run while the
// clients' times move with it.
func machineSpeed() (time.Duration, error) {
	data, err := json.Marshal(&probePod)
	if err != nil {
		return 0, err
	}
	const rounds = 2000
	best := time.Duration(1<<63 - 1)
	for range 5 {
		t := time.Now()
		for range rounds {
			var p corev1.Pod
			if err := json.Unmarshal(data, &p); err != nil {
				return 0, err
			}
			if _, err := json.Marshal(&p); err != nil {
				return 0, err
			}
		}
		best = min(best, time.Since(t))
	}
	return best / rounds, nil
}

// cpuTimes are /proc/stat's first line: the machine's CPU time by state,
// in clock ticks.
type cpuTimes struct{ total, steal uint64 }

func readCPUTimes() (cpuTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	return parseCPUTimes(string(data))
}

// parseCPUTimes reads the "cpu" line: user nice system idle iowait irq
// softirq steal (guest time is counted in user already).
func parseCPUTimes(stat string) (cpuTimes, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: no cpu line in %q", line)
	}
	var c cpuTimes
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		c.total += v
		if i == 7 {
			c.steal = v
		}
	}
	return c, nil
}

// stolenShare is the share of the machine's CPU time the host took (steal)
// between two readings.
func stolenShare(from, to cpuTimes) float64 {
	if to.total <= from.total {
		return 0
	}
	return float64(to.steal-from.steal) / float64(to.total-from.total)
}
