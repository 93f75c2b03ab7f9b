// Command memcached-exporter serves one memcached server's statistics as
// Prometheus metrics, with the flags, metric names and port of the upstream
// prometheus/memcached_exporter (which cannot be built here), so a fleet's
// sidecar works with that exporter's dashboards and alerts. Wiring only: the
// work is in internal/exporter.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/example/memcached-operator/internal/exporter"
)

func main() {
	address := flag.String("memcached.address", "localhost:11211", "Memcached server address.")
	timeout := flag.Duration("memcached.timeout", time.Second, "Bound on one scrape of memcached: connect, stats, stats settings.")
	listen := flag.String("web.listen-address", fmt.Sprintf(":%d", exporter.DefaultPort), "Address to serve metrics on.")
	path := flag.String("web.telemetry-path", "/metrics", "Path to serve metrics under.")
	authFile := flag.String("memcached.auth-file", "", "memcached's auth file (-Y): each scrape logs in with its first username:password entry, read anew so rotated credentials are followed. Empty: no authentication.")
	flag.Parse()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	mux := http.NewServeMux()
	mux.Handle(*path, exporter.Handler(exporter.NewCollector(*address, *timeout, logger).WithAuthFile(*authFile)))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("Serving memcached metrics", "listen", *listen, "path", *path, "memcached", *address, "authFile", *authFile)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("Exporter stopped", "error", err)
		os.Exit(1)
	}
}
