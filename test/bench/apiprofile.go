package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// apiServerProfiles records the API server's CPU profile in back-to-back
// windows of -apiserver-profile-seconds, from now until the returned stop is
// called, under profiles/ as apiserver-<phase>-<window>.pprof: where the API
// server's time goes while one client converges or resizes (merge the windows
// with `go tool pprof -top profiles/apiserver-<phase>-*.pprof`).
func (b *bench) apiServerProfiles(ctx context.Context, what string) (stop func()) {
	if b.f.apiServerProfileSeconds <= 0 {
		return func() {}
	}
	dir := filepath.Join(b.out, "profiles")
	if b.apiProfilePhase == 0 {
		// Phases are numbered from 1 in every run: an earlier run's windows
		// left in the folder would be merged into this run's by the glob.
		if err := removeAPIServerProfiles(dir); err != nil {
			logf("API server CPU profiles: %v", err)
		}
	}
	b.apiProfilePhase++
	pattern := filepath.Join(dir, fmt.Sprintf("apiserver-%02d-%%03d.pprof", b.apiProfilePhase))
	logf("  API server CPU profiles of %s: %s", what, strings.Replace(pattern, "%03d", "*", 1))
	return profileWindows(ctx, b.f.apiServerProfileSeconds, pattern, b.apiServerProfile)
}

// removeAPIServerProfiles deletes the API server profiles in dir, and
// nothing else there.
func removeAPIServerProfiles(dir string) error {
	old, err := filepath.Glob(filepath.Join(dir, "apiserver-*.pprof"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	return nil
}

// profileWindows calls take for windows of seconds, one after another, into
// files named by pattern and the window's number (from 1), until stop is
// called. stop waits for the window under way, so the last one runs past the
// phase by less than a window rather than losing its end. A failed window
// ends the recording and is logged: a profile is evidence, not a result.
func profileWindows(ctx context.Context, seconds int, pattern string, take func(ctx context.Context, seconds int, file string) error) (stop func()) {
	var (
		done atomic.Bool
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		for window := 1; !done.Load() && ctx.Err() == nil; window++ {
			if err := take(ctx, seconds, fmt.Sprintf(pattern, window)); err != nil {
				logf("API server CPU profile: %v", err)
				return
			}
		}
	})
	return func() {
		done.Store(true)
		wg.Wait()
	}
}

// apiServerProfile saves one CPU profile of the API server, seconds long, to file.
func (b *bench) apiServerProfile(ctx context.Context, seconds int, file string) error {
	body, err := adminGet(ctx, b.s, fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds))
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
