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
