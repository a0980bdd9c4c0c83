// Command demo runs CAPOV locally with an embedded control plane and the oVirt simulator
// (see test/demo). `make demo` runs it; DEMO_EXIT_WHEN_READY=1 makes it exit once Ready.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/capov/capov/test/demo"
)

func main() {
	workDir := flag.String("work-dir", envOr("DEMO_DIR", filepath.Join(".demo", time.Now().Format("20060102-150405"))), "Directory for logs, kubeconfigs and binaries (env DEMO_DIR).")
	exitWhenReady := flag.Bool("exit-when-ready", os.Getenv("DEMO_EXIT_WHEN_READY") == "1", "Exit 0 once everything is Ready (env DEMO_EXIT_WHEN_READY=1).")
	timeout := flag.Duration("timeout", 5*time.Minute, "How long to wait for everything to be Ready.")
	flag.Parse()
	// envtest logs its start through controller-runtime's global logger; the demo prints its
	// own progress and runs every other component as a process with its own log file.
	ctrllog.SetLogger(logr.Discard())
	abs, err := filepath.Abs(*workDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, demo.Options{WorkDir: abs, ExitWhenReady: *exitWhenReady, Timeout: *timeout, Out: os.Stdout}); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
