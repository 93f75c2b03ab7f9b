// Command webhook is cert-manager's admission webhook (validation, defaulting
// and conversion of cert-manager resources), configured by the same flags
// its Helm chart passes.
package main

import (
	"context"
	"fmt"
	"github.com/cert-manager/cert-manager/memcached-operator-testbed/internal/cmdutil"
	"os"

	"github.com/spf13/pflag"

	"github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
)

func main() { cmdutil.Main(run) }

func run(ctx context.Context) error {

	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	flags := options.NewWebhookFlags()
	flags.AddFlags(fs)
	options.AddConfigFlags(fs, cfg)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if flags.Config != "" {
		return fmt.Errorf("--config is not supported by this build; pass flags instead")
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return err
	}
	log := logf.Log.WithName("webhook")
	srv, err := webhook.NewCertManagerWebhookServer(log, *cfg)
	if err != nil {
		return err
	}
	return srv.Run(logf.NewContext(ctx, log))
}
