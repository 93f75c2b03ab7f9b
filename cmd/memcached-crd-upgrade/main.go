// Command memcached-crd-upgrade is the chart's pre-upgrade hook: it brings
// the cluster's Memcached CRD to the chart's version (internal/crdupgrade),
// and fails, failing the `helm upgrade`, when that would drop fields.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/memcached-operator/internal/crdupgrade"
)

func main() {
	crdFile := flag.String("crd-file", "/crds/crd.yaml", "The chart's CRD (YAML), from crds/.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *crdFile); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		if errors.Is(err, crdupgrade.ErrWouldDrop) {
			fmt.Fprintln(os.Stderr, "The cluster's CRD is newer than this chart's, or this chart removed fields: see docs/upgrading.md.")
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, crdFile string) error {
	data, err := os.ReadFile(crdFile)
	if err != nil {
		return err
	}
	next, err := crdupgrade.Decode(data)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading cluster config: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := apiextv1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	outcome, err := crdupgrade.Upgrade(ctx, c, next)
	if err != nil {
		return err
	}
	switch outcome {
	case crdupgrade.Missing:
		fmt.Printf("CRD %s is not in the cluster (installed with --skip-crds?): left to whoever manages it\n", next.Name)
		return nil
	case crdupgrade.Unchanged:
		fmt.Printf("CRD %s already matches the chart\n", next.Name)
	case crdupgrade.Updated:
		fmt.Printf("CRD %s upgraded to the chart's version\n", next.Name)
	}
	migrated, err := crdupgrade.MigrateStorage(ctx, c, next.Name)
	if err != nil {
		return err
	}
	if migrated > 0 {
		fmt.Printf("%d objects rewritten in the storage version; it is now the only one stored\n", migrated)
	}
	return nil
}
