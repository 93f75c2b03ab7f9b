package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// A fresh turn restarts some of the control plane: what it starts again must
// run its old command line and be recorded, or bench-cluster-down would
// leave it running.
func TestStoppedProcessesStartAgainAndAreRecorded(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(dir, "logs"), 0o700)).To(Succeed())
	s := &clusterState{Dir: dir, Ports: map[string]int{}}
	t.Cleanup(func() {
		if s, err := loadState(dir); err == nil {
			for _, p := range s.Procs {
				p.stop(time.Second)
			}
		}
	})
	for _, name := range []string{"etcd", "kube-scheduler", "kwok"} {
		g.Expect(s.start(name, "/bin/sleep", "300")).To(Succeed())
	}
	old := append([]proc(nil), s.Procs...)

	stopped, err := s.stopNamed([]string{"kube-scheduler", "kube-apiserver"}, 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stopped).To(HaveLen(1))
	g.Expect(old[1].running()).To(BeFalse())
	onDisk, err := loadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(onDisk.Procs)).To(Equal([]string{"etcd", "kwok"}))

	g.Expect(s.startAgain(context.Background(), stopped)).To(Succeed())
	onDisk, err = loadState(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(onDisk.Procs)).To(Equal([]string{"etcd", "kwok", "kube-scheduler"}))
	again := onDisk.Procs[2]
	g.Expect(again.PID).NotTo(Equal(old[1].PID))
	g.Expect(again.running()).To(BeTrue())
	g.Expect(again.Cmd).To(Equal([]string{"/bin/sleep", "300"}))
	g.Expect(onDisk.Procs[0]).To(Equal(old[0]), "etcd untouched")
	g.Expect(onDisk.Procs[1]).To(Equal(old[2]), "kwok untouched")
}

// A process recorded before command lines were is not guessed at, and
// nothing is stopped when one of them cannot start again.
func TestStopNamedStopsNothingWhenAProcessLacksItsCommandLine(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(dir, "logs"), 0o700)).To(Succeed())
	s := &clusterState{Dir: dir, Ports: map[string]int{}}
	g.Expect(s.start("kube-apiserver", "/bin/sleep", "300")).To(Succeed())
	g.Expect(s.start("kube-scheduler", "/bin/sleep", "300")).To(Succeed())
	t.Cleanup(func() {
		for _, p := range s.Procs {
			p.stop(time.Second)
		}
	})
	s.Procs[0].Cmd = nil // as state.json holds it from before command lines were recorded
	_, err := s.stopNamed([]string{"kube-apiserver", "kube-scheduler"}, time.Second)
	g.Expect(err).To(MatchError(ContainSubstring("bench-cluster-up")))
	g.Expect(s.Procs).To(HaveLen(2))
	g.Expect(s.Procs[1].running()).To(BeTrue(), "the scheduler, newer and restartable, was not stopped")
}

func names(procs []proc) []string {
	out := make([]string, 0, len(procs))
	for _, p := range procs {
		out = append(out, p.Name)
	}
	return out
}
