package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

func TestProfileWindowsRunBackToBackUntilStoppedAndKeepTheLast(t *testing.T) {
	g := NewWithT(t)
	var (
		mu       sync.Mutex
		files    []string
		lengths  []int
		finished int
	)
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	take := func(_ context.Context, seconds int, file string) error {
		mu.Lock()
		files, lengths = append(files, file), append(lengths, seconds)
		mu.Unlock()
		started <- struct{}{}
		<-release
		mu.Lock()
		finished++
		mu.Unlock()
		return nil
	}
	stop := profileWindows(context.Background(), 10, "p/apiserver-03-%03d.pprof", take)
	<-started
	release <- struct{}{}
	<-started // the second window follows the first at once
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	g.Consistently(stopped).ShouldNot(BeClosed(), "stop waits for the window under way")
	close(release)
	g.Eventually(stopped).Should(BeClosed())
	mu.Lock()
	defer mu.Unlock()
	g.Expect(files).To(Equal([]string{"p/apiserver-03-001.pprof", "p/apiserver-03-002.pprof"}), "no window after stop")
	g.Expect(lengths).To(Equal([]int{10, 10}))
	g.Expect(finished).To(Equal(2))
}

func TestAFailedProfileWindowEndsTheRecording(t *testing.T) {
	g := NewWithT(t)
	var calls atomic.Int32
	stop := profileWindows(context.Background(), 1, "%03d", func(context.Context, int, string) error {
		calls.Add(1)
		return errors.New("cpu profiling already in use")
	})
	g.Eventually(calls.Load).Should(Equal(int32(1)))
	g.Consistently(calls.Load).Should(Equal(int32(1)), "no window after a failed one")
	stop()
}

func TestAnEarlierRunsAPIServerProfilesAreRemovedAndNothingElse(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	for _, f := range []string{"apiserver-01-001.pprof", "apiserver-01-007.pprof", "resize-cpu.pprof", "converged-heap.pprof"} {
		g.Expect(os.WriteFile(filepath.Join(dir, f), nil, 0o644)).To(Succeed())
	}
	g.Expect(removeAPIServerProfiles(dir)).To(Succeed())
	left, err := filepath.Glob(filepath.Join(dir, "*"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(ConsistOf(filepath.Join(dir, "resize-cpu.pprof"), filepath.Join(dir, "converged-heap.pprof")))
	g.Expect(removeAPIServerProfiles(filepath.Join(dir, "absent"))).To(Succeed(), "no folder yet")
}
