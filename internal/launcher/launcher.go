// Package launcher runs memcached with a restartable cache (-e, a memory
// file on the pod's memory-backed volume) as a child, so that a container
// stop keeps the cache: the kubelet's SIGTERM becomes memcached's SIGUSR1,
// on which it writes the file's metadata and exits, and the next memcached
// started in the same pod with the same file and settings serves every key
// again. A memcached that dies any other way (a crash, an OOM kill) leaves
// no metadata, and the next one starts cold, as it must: the memory file
// may be half written.
//
// memcached's command line can come from a file (the pod's downward API
// view of an annotation, which the operator changes in place): when it
// changes, the launcher saves the cache and ends, and the kubelet starts
// the container again in the same pod, on the same file, with the new
// options.
package launcher

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/example/memcached-operator/internal/policy"
)

// restartGap is how long after a stop memcached may start again on the
// same memory file: it refuses the metadata of a stop in the same second
// ("restart incompatible due to setting for [stop_time]") and starts cold.
const restartGap = 1100 * time.Millisecond

// argsPoll is how often the args file is read for a change.
const argsPoll = time.Second

// Launcher runs one memcached.
type Launcher struct {
	// Memcached is the binary; Args its command line, which holds
	// -e MemoryFile, or ArgsFile the JSON array of strings that holds it.
	Memcached string
	Args      []string
	ArgsFile  string
	// MemoryFile is memcached's -e file; its metadata is MemoryFile.meta.
	MemoryFile string
	// TerminationLog is where the outcome is written for the container's
	// status (kubectl describe pod); empty writes none.
	TerminationLog string
	Log            *slog.Logger
	// sleep is time.Sleep, replaceable in tests; started, when set, is
	// told memcached's process.
	sleep   func(time.Duration)
	started func(*os.Process)
	poll    time.Duration
	// free is freeBytes, replaceable in tests: the room left on the
	// memory file's volume.
	free func(dir string) (int64, error)
}

// ReadArgs reads a command line written as a JSON array of strings.
func ReadArgs(path string) (raw []byte, args []string, err error) {
	raw, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(raw, &args); err != nil || len(args) == 0 {
		return nil, nil, fmt.Errorf("%s holds no JSON array of memcached's arguments: %q", path, raw)
	}
	return raw, args, nil
}

// Outcome is how a run ended.
type Outcome struct {
	// Saved: memcached stopped on request and wrote its metadata, so the
	// next start is warm.
	Saved bool
	// ExitCode is the container's exit code: 0 when saved.
	ExitCode int
	Message  string
}

// Warm tells whether memcached will find a saved cache on start.
func (l *Launcher) Warm() bool {
	_, err := os.Stat(l.MemoryFile + ".meta")
	return err == nil
}

// Run starts memcached and waits for it to end. A stop signal (SIGTERM,
// SIGINT) asks it to save its cache and stop (SIGUSR1); ctx ending does the
// same. Other signals are memcached's business: the auth reloader signals it
// directly.
func (l *Launcher) Run(ctx context.Context, stop <-chan os.Signal) Outcome {
	args, argsRaw := l.Args, []byte(nil)
	var poll <-chan time.Time // nil, never ready, without an args file
	if l.ArgsFile != "" {
		var err error
		if argsRaw, args, err = ReadArgs(l.ArgsFile); err != nil {
			return l.finish(Outcome{ExitCode: 2, Message: err.Error()})
		}
		t := time.NewTicker(cmp.Or(l.poll, argsPoll))
		defer t.Stop()
		poll = t.C
	}
	l.restore(args)
	if err := l.recordArgs(args); err != nil {
		l.Log.Warn("Cannot record memcached's command line beside its memory file: a later change of its item memory starts cold", "error", err.Error())
	}
	cmd := exec.Command(l.Memcached, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return l.finish(Outcome{ExitCode: 127, Message: fmt.Sprintf("starting memcached: %v", err)})
	}
	if l.started != nil {
		l.started(cmd.Process)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	asked, reargs := false, false
	for {
		select {
		case <-stop:
		case <-ctx.Done():
			ctx = context.Background() // once
		case <-poll:
			if asked {
				continue
			}
			// A file that cannot be read or parsed is a write in progress
			// or a mistake: memcached goes on with what it runs.
			if raw, _, err := ReadArgs(l.ArgsFile); err != nil || bytes.Equal(raw, argsRaw) {
				continue
			}
			reargs = true
			l.Log.Info("memcached's options changed: saving its cache and ending, to start again with them")
		case err := <-done:
			o := l.outcome(asked, err)
			if reargs && o.Saved {
				o.Message = "memcached's options changed: it saved its cache to " + l.MemoryFile +
					" and the container starts again with them, warm unless they change a setting the file was made with"
			}
			return l.finish(o)
		}
		if !asked {
			asked = true
			if !reargs {
				l.Log.Info("Stopping memcached, which saves its cache first")
			}
			_ = cmd.Process.Signal(syscall.SIGUSR1)
		}
	}
}

// restore readies the memory file for a start under args: a saved cache
// is reused as it is, or copied into a file made under args when they
// change a setting it was made with (migrate); else memcached starts cold.
func (l *Launcher) restore(args []string) {
	if !l.waitGap() {
		if _, err := os.Stat(l.MemoryFile); err == nil {
			l.Log.Warn("memcached ended without saving its cache (a crash, an OOM kill or a kill): starting cold", "memoryFile", l.MemoryFile)
		} else {
			l.Log.Info("No cache to restore: starting cold", "memoryFile", l.MemoryFile)
		}
		return
	}
	if old := l.savedUnder(args); old != nil {
		l.Log.Info("memcached's new options change a setting its memory file was made with: copying the saved cache into a new file",
			"before", policy.MemoryFileSettings(old), "after", policy.MemoryFileSettings(args))
		m, err := l.migrate(old, args)
		if err != nil {
			l.Log.Error("Copying the saved cache failed: starting cold", "error", err.Error(), "copied", m.Copied, "seconds", m.Took.Seconds())
			return
		}
		l.Log.Info("Copied the saved cache into a new memory file", "copied", m.Copied, "dropped", m.Dropped, "volumeFull", m.Full, "seconds", m.Took.Seconds())
		l.waitGap()
	}
	l.Log.Info("Starting memcached on its saved cache", "memoryFile", l.MemoryFile)
}

// waitGap waits until memcached may start on the saved cache, if there is
// one, and tells whether there is.
func (l *Launcher) waitGap() bool {
	fi, err := os.Stat(l.MemoryFile + ".meta")
	if err != nil {
		return false
	}
	if wait := restartGap - time.Since(fi.ModTime()); wait > 0 {
		l.pause(wait)
	}
	return true
}

func (l *Launcher) outcome(asked bool, err error) Outcome {
	var exit *exec.ExitError
	switch {
	case err == nil && asked && l.Warm():
		return Outcome{Saved: true, Message: "memcached saved its cache to " + l.MemoryFile + ": the next start in this pod is warm"}
	case err == nil && asked:
		return Outcome{ExitCode: 1, Message: "memcached stopped without saving its cache: the next start is cold"}
	case errors.As(err, &exit):
		code := exit.ExitCode()
		if code < 0 {
			code = 128 + int(exit.Sys().(syscall.WaitStatus).Signal())
		}
		return Outcome{ExitCode: code, Message: fmt.Sprintf("memcached ended (%v) without saving its cache: the next start is cold", err)}
	case err != nil:
		return Outcome{ExitCode: 1, Message: fmt.Sprintf("waiting for memcached: %v", err)}
	}
	return Outcome{ExitCode: 1, Message: "memcached exited on its own without saving its cache: the next start is cold"}
}

func (l *Launcher) finish(o Outcome) Outcome {
	if o.Saved {
		l.Log.Info(o.Message)
	} else {
		l.Log.Error(o.Message, "exitCode", o.ExitCode)
	}
	if l.TerminationLog != "" {
		_ = os.WriteFile(l.TerminationLog, []byte(o.Message), 0o644)
	}
	return o
}

func (l *Launcher) pause(d time.Duration) {
	if l.sleep != nil {
		l.sleep(d)
		return
	}
	time.Sleep(d)
}

// Install copies the running binary to dst, for the init container that
// puts the launcher where the memcached container, whose image has only
// memcached, runs it.
func Install(dst string) error {
	src, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
