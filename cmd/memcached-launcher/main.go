// Command memcached-launcher runs memcached in the pods of a fleet with
// spec.warmRestart: it turns the container's stop into a save of the cache
// (internal/launcher). With --install it copies itself to a path and exits:
// the pod's init container, which puts it beside memcached. Wiring only.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/example/memcached-operator/internal/launcher"
)

func main() {
	install := flag.String("install", "", "Copy this binary to the path and exit.")
	memoryFile := flag.String("memory-file", "", "memcached's -e memory file.")
	argsFile := flag.String("args-file", "", "A file holding memcached's arguments as a JSON array, read at start and watched: a change saves the cache and ends the launcher, to start again with them.")
	bin := flag.String("memcached", "", "The memcached binary. Empty: memcached on the PATH, else /usr/bin/memcached or /usr/local/bin/memcached.")
	termLog := flag.String("termination-log", "/dev/termination-log", "Where the outcome is written for the container's status.")
	flag.Parse()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if *install != "" {
		if err := launcher.Install(*install); err != nil {
			logger.Error("Installing the launcher", "error", err.Error())
			os.Exit(1)
		}
		return
	}
	if *memoryFile == "" || (flag.NArg() == 0) == (*argsFile == "") {
		logger.Error("Usage: memcached-launcher --memory-file=FILE (--args-file=FILE | -- MEMCACHED-ARGS...)")
		os.Exit(2)
	}
	if *bin == "" {
		*bin = findMemcached()
	}
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	l := &launcher.Launcher{Memcached: *bin, Args: flag.Args(), ArgsFile: *argsFile, MemoryFile: *memoryFile, TerminationLog: *termLog, Log: logger}
	os.Exit(l.Run(context.Background(), stop).ExitCode)
}

func findMemcached() string {
	if p, err := exec.LookPath("memcached"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/bin/memcached", "/usr/local/bin/memcached"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "memcached"
}
