// Command bench measures the memcached operator on a control plane of its
// own: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// with simulated nodes, all on loopback. It runs its scenarios
// (converge, resize, idle, churn, restart, admission) side by side with a
// reference client that makes only the minimal writes, and prints a table,
// results.json and PNG plots. See test/bench/README.md.
//
//	bench up    start the control plane (make bench-cluster-up)
//	bench down  stop it and remove its data (make bench-cluster-down)
//	bench run   run the scenarios against it (make bench)
//	bench plot  redraw the plots and the table of a results.json
//	bench floor-webhook  serve the cheapest webhook (started by bench run)
//	bench handler-webhook  serve the operator's webhook handlers alone, or with -fixed a handler that allows (started by bench run)
//	bench cache-cost  weigh the cache's objects read on stdin (started by bench run)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bench up|down|run|plot [flags]")
		os.Exit(2)
	}
	// controller-runtime's caches log through it; errors only.
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = cmdUp(ctx, args)
	case "down":
		err = cmdDown(args)
	case "run":
		err = cmdRun(ctx, args)
	case "plot":
		err = cmdPlot(args)
	case "floor-webhook":
		err = cmdFloorWebhook(ctx, args)
	case "handler-webhook":
		err = cmdHandlerWebhook(ctx, args)
	case "cache-cost":
		err = cmdCacheCost(os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q (up, down, run, plot)", cmd)
	}
	if err != nil {
		logf("FAILED: %v", err)
		os.Exit(1)
	}
}

// commonFlags are where the bench keeps its files and finds its binaries.
type commonFlags struct {
	out, binDir string
	nodes       int
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.out, "out", "_output/bench", "Folder of the cluster's data, logs, results.json and plots.")
	fs.StringVar(&c.binDir, "bin-dir", "_output/bench/bin", "Folder with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and memcached-operator.")
	fs.IntVar(&c.nodes, "nodes", 50, "Simulated (kwok) nodes.")
}

func (c *commonFlags) clusterDir() string { return filepath.Join(c.out, "cluster") }

func cmdUp(ctx context.Context, args []string) error {
	var c commonFlags
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	c.register(fs)
	_ = fs.Parse(args)
	dir, err := filepath.Abs(c.clusterDir())
	if err != nil {
		return err
	}
	_, err = clusterUp(ctx, dir, c.binDir, c.nodes)
	return err
}

func cmdDown(args []string) error {
	var c commonFlags
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	c.register(fs)
	_ = fs.Parse(args)
	dir, err := filepath.Abs(c.clusterDir())
	if err != nil {
		return err
	}
	return clusterDown(dir)
}

// cmdPlot redraws the plots and results.md of a results.json into its folder.
func cmdPlot(args []string) error {
	fs := flag.NewFlagSet("plot", flag.ExitOnError)
	file := fs.String("results", "_output/bench/results.json", "results.json to draw.")
	_ = fs.Parse(args)
	data, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	r := &results{}
	if err := json.Unmarshal(data, r); err != nil {
		return err
	}
	dir := filepath.Dir(*file)
	r.evaluate()
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(r.table()), 0o644); err != nil {
		return err
	}
	return plots(r, dir)
}
