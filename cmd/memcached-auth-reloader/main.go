// Command memcached-auth-reloader runs beside memcached in a fleet's pods
// when spec.auth or spec.tls is set. With an auth file it watches the file
// and sends memcached SIGHUP when the Secret's content changes, so memcached
// re-reads its credentials without a restart; the pod shares its process
// namespace and both containers run as the same user, which is all
// signalling needs. With a certificate it watches the certificate and key
// and sends refresh_certs over memcached's loopback listener without TLS
// when cert-manager renews them. With --check it only checks the auth file
// and exits: the pod's auth-check init container, which holds memcached
// back with a message until the file is one memcached accepts. Wiring only:
// the work is in internal/authreload.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/example/memcached-operator/internal/authreload"
)

func main() {
	file := flag.String("auth-file", "", "The auth file memcached was started with (-Y). Empty: no auth file to watch.")
	proc := flag.String("proc", "/proc", "The proc filesystem of the pod's shared process namespace.")
	comm := flag.String("process-name", "memcached", "Name (/proc/<pid>/comm) of the process to signal.")
	certFile := flag.String("tls-cert-file", "", "The certificate memcached serves (-o ssl_chain_cert). Empty: no certificate to watch.")
	keyFile := flag.String("tls-key-file", "", "The certificate's key (-o ssl_key).")
	address := flag.String("memcached.address", "127.0.0.1:11299", "memcached's listener without TLS on the pod's loopback, for refresh_certs.")
	interval := flag.Duration("interval", authreload.DefaultInterval, "How often the files are read.")
	check := flag.Bool("check", false, "Check --auth-file as memcached would read it, and exit: 0 when memcached accepts it.")
	flag.Parse()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if *check {
		if err := authreload.CheckAuthFile(*file); err != nil {
			// The termination message is what kubectl describe shows.
			_ = os.WriteFile("/dev/termination-log", []byte(err.Error()), 0o644)
			logger.Error("The auth file is not one memcached accepts", "error", err.Error())
			os.Exit(1)
		}
		logger.Info("The auth file is one memcached accepts", "file", *file)
		return
	}
	if *file == "" && *certFile == "" {
		logger.Error("Nothing to watch: set --auth-file, --tls-cert-file, or both")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Either watcher failing ends the other, and the container: the
	// kubelet restarts it, which is the retry.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var runs []func(context.Context) error
	if *file != "" {
		runs = append(runs, (&authreload.Reloader{File: *file, ProcDir: *proc, Comm: *comm, Signal: syscall.SIGHUP, Interval: *interval, Log: logger}).Run)
	}
	if *certFile != "" {
		files := []string{*certFile}
		if *keyFile != "" {
			files = append(files, *keyFile)
		}
		runs = append(runs, (&authreload.CertRefresher{Files: files, Address: *address, AuthFile: *file, Interval: *interval, Log: logger}).Run)
	}
	errs := make(chan error, len(runs))
	for _, run := range runs {
		go func() { err := run(ctx); cancel(); errs <- err }()
	}
	var err error
	for range runs {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		logger.Error("Reloader stopped", "error", err.Error())
		os.Exit(1)
	}
}
