package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	. "github.com/onsi/gomega"
)

// TestMemcgLimitsAndCounts: a process in the bench's memory cgroup is held
// to its limit, and the account reports the limit, the usage and the kill.
// Creating a cgroup takes root, which CI has.
func TestMemcgLimitsAndCounts(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("creating a memory cgroup needs root, which CI has")
		}
		t.Skip("creating a memory cgroup needs root (CI runs as root)")
	}
	g := NewWithT(t)
	cg, err := newMemcg("memcached-bench-test-"+strconv.Itoa(os.Getpid()), "32Mi")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(cg.remove()).To(Succeed()) }()

	sleeper := exec.Command("sleep", "60")
	g.Expect(sleeper.Start()).To(Succeed())
	g.Expect(cg.add(sleeper.Process.Pid)).To(Succeed())
	st, err := cg.stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.LimitMiB).To(Equal(32.0))
	g.Expect(st.UsageMiB).To(BeNumerically("<", 32))
	g.Expect(st.OOMKills).To(BeZero())
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()

	// dd holds one 64 MiB block in anonymous memory: twice the limit.
	hog := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=4")
	hog.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Moved in before it allocates: it starts stopped.
	g.Expect(hog.Start()).To(Succeed())
	_ = hog.Process.Signal(syscall.SIGSTOP)
	g.Expect(cg.add(hog.Process.Pid)).To(Succeed())
	_ = hog.Process.Signal(syscall.SIGCONT)
	err = hog.Wait()
	var exit *exec.ExitError
	g.Expect(errors.As(err, &exit)).To(BeTrue(), "dd must be killed, not finish: %v", err)
	g.Expect(exit.Sys().(syscall.WaitStatus).Signal()).To(Equal(syscall.SIGKILL))
	st, err = cg.stats()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.OOMKills).To(Equal(int64(1)))
	g.Expect(st.PeakMiB).To(BeNumerically("<=", 32))
}
