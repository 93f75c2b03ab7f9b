package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/rest"
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
	b.apiProfilePhase++
	pattern := filepath.Join(b.out, "profiles", fmt.Sprintf("apiserver-%02d-%%03d.pprof", b.apiProfilePhase))
	logf("  API server CPU profiles of %s: %s", what, strings.Replace(pattern, "%03d", "*", 1))
	return profileWindows(ctx, b.f.apiServerProfileSeconds, pattern, b.apiServerProfile)
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
	cfg, err := restConfig(b.s, userAdmin)
	if err != nil {
		return err
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", cfg.Host, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/profile: %s", resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
