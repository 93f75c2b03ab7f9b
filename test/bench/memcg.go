package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// memcg is a memory cgroup of the bench's own, which holds the operator
// under a memory limit as a container's would: the kernel then reclaims the
// binary's file-backed pages before it kills, and what the operator cannot
// give back is its working set (usage minus inactive file pages, as the
// kubelet counts it). Version 2 when the unified hierarchy has the memory
// controller, version 1 otherwise.
type memcg struct {
	dir string
	v2  bool
}

// newMemcg creates the cgroup name with limit (a Kubernetes quantity,
// "64Mi").
func newMemcg(name, limit string) (*memcg, error) {
	q, err := resource.ParseQuantity(limit)
	if err != nil {
		return nil, fmt.Errorf("memory limit %q: %w", limit, err)
	}
	var cg *memcg
	switch {
	case controllerEnabled("/sys/fs/cgroup/cgroup.controllers"):
		cg = &memcg{dir: filepath.Join("/sys/fs/cgroup", name), v2: true}
	case isDir("/sys/fs/cgroup/memory"):
		cg = &memcg{dir: filepath.Join("/sys/fs/cgroup/memory", name)}
	default:
		return nil, errors.New("no memory cgroup controller: neither /sys/fs/cgroup/cgroup.controllers lists memory nor /sys/fs/cgroup/memory exists")
	}
	if err := os.Mkdir(cg.dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, err
	}
	// Best effort: no swap (v2), and charges moving with the process (v1,
	// refused by recent kernels; the process is moved a few milliseconds
	// after it starts, before it has allocated anything that matters).
	files := [][3]string{{"memory.max", strconv.FormatInt(q.Value(), 10)}, {"memory.swap.max", "0", "optional"}}
	if !cg.v2 {
		files = [][3]string{{"memory.limit_in_bytes", strconv.FormatInt(q.Value(), 10)},
			{"memory.move_charge_at_immigrate", "3", "optional"}, {"memory.max_usage_in_bytes", "0"}}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(cg.dir, f[0]), []byte(f[1]), 0o644); err != nil && f[2] == "" {
			return nil, fmt.Errorf("%s: %w", filepath.Join(cg.dir, f[0]), err)
		}
	}
	return cg, nil
}

func controllerEnabled(file string) bool {
	data, err := os.ReadFile(file)
	return err == nil && strings.Contains(" "+strings.TrimSpace(string(data))+" ", " memory ")
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// add moves pid into the cgroup.
func (cg *memcg) add(pid int) error {
	return os.WriteFile(filepath.Join(cg.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// memcgStats is what the cgroup charged: its peak, the working set now, and
// the kills the limit caused.
type memcgStats struct {
	LimitMiB      float64 `json:"limitMiB"`
	PeakMiB       float64 `json:"peakMiB"`
	UsageMiB      float64 `json:"usageMiB"`
	WorkingSetMiB float64 `json:"workingSetMiB"`
	OOMKills      int64   `json:"oomKills"`
}

func (cg *memcg) stats() (memcgStats, error) {
	var st memcgStats
	read := func(f string) (int64, error) {
		data, err := os.ReadFile(filepath.Join(cg.dir, f))
		if err != nil {
			return 0, err
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0, nil
		}
		return strconv.ParseInt(s, 10, 64)
	}
	keyed := func(f string) (map[string]int64, error) {
		file, err := os.Open(filepath.Join(cg.dir, f))
		if err != nil {
			return nil, err
		}
		defer func() { _ = file.Close() }()
		m := map[string]int64{}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), " "); ok {
				m[k], _ = strconv.ParseInt(v, 10, 64)
			}
		}
		return m, sc.Err()
	}
	files := [4]string{"memory.max", "memory.peak", "memory.current", "memory.events"}
	inactive, kills := "inactive_file", "oom_kill"
	if !cg.v2 {
		files = [4]string{"memory.limit_in_bytes", "memory.max_usage_in_bytes", "memory.usage_in_bytes", "memory.oom_control"}
		inactive = "total_inactive_file"
	}
	var vals [3]int64
	for i, f := range files[:3] {
		v, err := read(f)
		if err != nil {
			return st, err
		}
		vals[i] = v
	}
	stat, err := keyed("memory.stat")
	if err != nil {
		return st, err
	}
	events, err := keyed(files[3])
	if err != nil {
		return st, err
	}
	const mib = 1 << 20
	st.LimitMiB, st.PeakMiB, st.UsageMiB = float64(vals[0])/mib, float64(vals[1])/mib, float64(vals[2])/mib
	st.WorkingSetMiB = float64(max(vals[2]-stat[inactive], 0)) / mib
	st.OOMKills = events[kills]
	return st, nil
}

// remove deletes the cgroup once its processes have exited.
func (cg *memcg) remove() error {
	return os.Remove(cg.dir)
}
