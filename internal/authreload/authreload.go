// Package authreload keeps a running memcached's credentials equal to its
// auth file. memcached reads the file (-Y) at start and again on SIGHUP; the
// kubelet rewrites a Secret volume in place (an atomic swap of a symlink)
// when the Secret changes. Watching the file and sending SIGHUP rotates the
// credentials without restarting memcached, so the cache stays warm.
package authreload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultInterval is how often the file is read: the kubelet's own sync of
// a Secret volume takes up to a minute, so a few seconds more add nothing.
const DefaultInterval = 2 * time.Second

// Reloader signals the processes named Comm under ProcDir whenever the
// content of File changes.
type Reloader struct {
	// File is the auth file as mounted.
	File string
	// ProcDir is the proc filesystem of the pod's shared process
	// namespace; "/proc" unless a test fakes it.
	ProcDir string
	// Comm is the process name to signal, as /proc/<pid>/comm gives it.
	Comm string
	// Signal is what is sent; memcached re-reads its auth file on SIGHUP.
	Signal syscall.Signal
	// Interval between two reads of File.
	Interval time.Duration
	// Log says what was done.
	Log *slog.Logger
	// kill is syscall.Kill, replaceable in tests.
	kill func(pid int, sig syscall.Signal) error
}

// Run reads File every Interval until ctx ends, and signals memcached once
// at start and then after each change of the file's content. The signal at
// start closes the gap between memcached reading the file and this first
// reading it: a reload of an unchanged file changes nothing. A signal that
// cannot be delivered (memcached not started yet, or not yet catching it)
// stays due and is retried on the next tick.
func (r *Reloader) Run(ctx context.Context) error {
	last, err := digest(r.File)
	if err != nil {
		// The kubelet mounts the file before the containers start; its
		// absence is a broken pod, not something to wait for.
		return err
	}
	r.Log.Info("Watching the auth file", "file", r.File, "interval", r.Interval.String(), "sha256", short(last))
	due, reason := true, "start"
	lastErr := ""
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		if cur, err := digest(r.File); err != nil {
			// Read between the kubelet's swaps, or a transient error: the
			// next tick sees the settled file.
			r.Log.Info("Could not read the auth file; trying again", "file", r.File, "error", err.Error())
		} else if !bytes.Equal(cur, last) {
			last, due, reason = cur, true, "changed"
		}
		if due {
			if err := CheckAuthFile(r.File); err != nil {
				// memcached would read it differently from what it says
				// (or exit on its next start): it keeps the credentials it
				// has, and the log says why, until the file changes again.
				r.Log.Error("The auth file is not one memcached accepts; memcached keeps its current credentials until it is fixed", "file", r.File, "sha256", short(last), "error", err.Error())
				due = false
			}
		}
		if due {
			switch pids, err := r.SignalAll(); {
			case err != nil && err.Error() != lastErr:
				// Logged once per distinct failure: at start memcached may
				// take a few ticks to appear.
				lastErr = err.Error()
				r.Log.Info("Could not signal memcached yet; trying again", "reason", reason, "error", lastErr)
			case err == nil:
				r.Log.Info("Signalled memcached to reload the auth file", "reason", reason, "file", r.File, "sha256", short(last), "signal", r.Signal.String(), "pids", pids)
				due, lastErr = false, ""
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// SignalAll sends Signal to every process named Comm and returns their PIDs.
// It fails when there is none, or when one does not catch the signal yet
// (SIGHUP's default action ends the process: memcached sets its handler a
// moment after it starts).
func (r *Reloader) SignalAll() ([]int, error) {
	pids, err := FindProcesses(r.ProcDir, r.Comm)
	if err != nil {
		return nil, err
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("no process named %q under %s: not started yet, or the pod does not share its process namespace", r.Comm, r.ProcDir)
	}
	for _, pid := range pids {
		switch ok, err := Catches(r.ProcDir, pid, r.Signal); {
		case err != nil:
			return nil, fmt.Errorf("reading whether process %d catches %s: %w", pid, r.Signal, err)
		case !ok:
			return nil, fmt.Errorf("process %d does not catch %s yet", pid, r.Signal)
		}
	}
	kill := r.kill
	if kill == nil {
		kill = syscall.Kill
	}
	var errs []error
	for _, pid := range pids {
		if err := kill(pid, r.Signal); err != nil {
			errs = append(errs, fmt.Errorf("signalling pid %d: %w", pid, err))
		}
	}
	return pids, errors.Join(errs...)
}

// Catches reads whether process pid has a handler for sig, from the SigCgt
// mask of /proc/<pid>/status.
func Catches(procDir string, pid int, sig syscall.Signal) (bool, error) {
	raw, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "status"))
	if err != nil {
		return false, err
	}
	for line := range strings.Lines(string(raw)) {
		if mask, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			if err != nil {
				return false, fmt.Errorf("reading SigCgt of %d: %w", pid, err)
			}
			return m&(1<<(uint(sig)-1)) != 0, nil
		}
	}
	return false, fmt.Errorf("no SigCgt in the status of %d", pid)
}

// FindProcesses lists the PIDs under procDir whose comm is name. Processes
// that exit while being read are skipped.
func FindProcesses(procDir, name string) ([]int, error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(procDir, e.Name(), "comm"))
		if err != nil {
			continue
		}
		if string(bytes.TrimSpace(comm)) == name {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

func digest(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

func short(sum []byte) string { return fmt.Sprintf("%x", sum[:6]) }
