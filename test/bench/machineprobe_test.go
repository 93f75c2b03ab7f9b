package main

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// The probe times real work: the pod survives its round trip whole.
func TestMachineProbeRoundTripsAWholePod(t *testing.T) {
	g := NewWithT(t)
	data, err := json.Marshal(&probePod)
	g.Expect(err).NotTo(HaveOccurred())
	var p corev1.Pod
	g.Expect(json.Unmarshal(data, &p)).To(Succeed())
	g.Expect(p).To(Equal(probePod))
	g.Expect(data).To(ContainSubstring(`"ownerReferences"`))
	speed, err := machineSpeed()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(speed).To(BeNumerically(">", 0))
}

// /proc/stat's cpu line: user nice system idle iowait irq softirq steal guest guest_nice.
func TestStolenShareReadsTheStealColumn(t *testing.T) {
	g := NewWithT(t)
	from, err := parseCPUTimes("cpu  5519447 7320 1080195 4773271 20379 0 101216 333824 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	g.Expect(err).NotTo(HaveOccurred())
	to, err := parseCPUTimes("cpu  5520261 7320 1080250 4773272 20379 0 101225 333924 0 0\n")
	g.Expect(err).NotTo(HaveOccurred())
	// 814 + 55 + 1 + 9 + 100 = 979 ticks, 100 of them stolen.
	g.Expect(stolenShare(from, to)).To(BeNumerically("~", 100.0/979, 1e-9))
	g.Expect(stolenShare(to, from)).To(BeZero(), "a reading from before is no interval")
	_, err = parseCPUTimes("intr 1 2 3\n")
	g.Expect(err).To(HaveOccurred())
}
