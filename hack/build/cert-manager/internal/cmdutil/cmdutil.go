// Package cmdutil is what the three cert-manager mains share: a context that
// ends on SIGINT or SIGTERM, cert-manager's logging, and an exit status.
package cmdutil

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// Main runs run with that context and exits non-zero when it fails.
func Main(run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	logf.InitLogs()
	err := run(ctx)
	logf.FlushLogs()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// ParseFlags adds cert-manager's logging flags and the chart's --config (which
// these mains ignore) to fs, parses the command line and applies the logging
// settings.
func ParseFlags(fs *pflag.FlagSet, logging *logsapi.LoggingConfiguration) error {
	fs.String("config", "", "ignored by this build")
	logf.AddFlags(logging, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	return logf.ValidateAndApply(logging)
}
