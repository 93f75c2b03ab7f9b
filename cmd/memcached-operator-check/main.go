// Command memcached-operator-check is the `helm test` workload: it runs
// internal/installcheck against the cluster it is in, with the ServiceAccount
// the chart gives it, and exits non-zero when the install does not work.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/example/memcached-operator/apis/cache/v1alpha1"
	"github.com/example/memcached-operator/internal/installcheck"
)

func main() {
	var cfg installcheck.Config
	var maxSize int
	flag.StringVar(&cfg.Namespace, "namespace", "default", "Namespace to create Memcacheds in; the operator must watch it and its webhooks admit it.")
	flag.StringVar(&cfg.Name, "name", "memcached-operator-check", "Name prefix of the Memcacheds the check creates.")
	flag.IntVar(&maxSize, "max-size", 100, "The operator's --max-size.")
	flag.StringVar(&cfg.DefaultImage, "default-image", "memcached:1.6", "The operator's --default-image, which the mutating webhook must fill in.")
	flag.BoolVar(&cfg.Memcached, "memcached", false, "Also create a real Memcached, wait until it is Available and set/get a key through its Service.")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "How long to wait for the real Memcached to become Available.")
	flag.Parse()
	cfg.MaxSize = int32(min(maxSize, cachev1alpha1.SizeSchemaMaximum))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg installcheck.Config) error {
	restCfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading cluster config: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	checker := &installcheck.Checker{Client: c, Config: cfg, Out: os.Stdout}
	return checker.Run(ctx)
}
