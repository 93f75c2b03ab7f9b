// Command memcached-auth-reloader runs beside memcached in a fleet's pods
// when spec.auth is set: it watches the mounted auth file and sends
// memcached SIGHUP when the Secret's content changes, so memcached re-reads
// its credentials without a restart. The pod shares its process namespace
// and both containers run as the same user, which is all signalling needs.
// Wiring only: the work is in internal/authreload.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/example/memcached-operator/internal/authreload"
)

func main() {
	file := flag.String("auth-file", "/etc/memcached/auth/auth-file", "The auth file memcached was started with (-Y).")
	proc := flag.String("proc", "/proc", "The proc filesystem of the pod's shared process namespace.")
	comm := flag.String("process-name", "memcached", "Name (/proc/<pid>/comm) of the process to signal.")
	interval := flag.Duration("interval", authreload.DefaultInterval, "How often the auth file is read.")
	flag.Parse()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r := &authreload.Reloader{File: *file, ProcDir: *proc, Comm: *comm, Signal: syscall.SIGHUP, Interval: *interval, Log: logger}
	if err := r.Run(ctx); err != nil {
		logger.Error("Reloader stopped", "error", err.Error())
		os.Exit(1)
	}
}
