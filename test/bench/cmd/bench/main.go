// Command bench runs the CAPOV provisioning benchmark (see test/bench) and writes
// docs/benchmarks.md and its charts. `make bench` runs the full set; -set=smoke a small one;
// -set=webhook only the admission load test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/capov/capov/test/bench"
	"github.com/capov/capov/test/envtest"
)

func main() {
	set := flag.String("set", "full", "Scenario set: full, smoke, or webhook (no provisioning scenario, only the admission load test; docs are not rewritten).")
	doc := flag.String("doc", "docs/benchmarks.md", "Markdown file whose generated section is rewritten, relative to the repository (empty: do not write).")
	charts := flag.String("charts", "docs/bench", "Directory for the PNG charts, relative to the repository.")
	workDir := flag.String("work-dir", "", "Work directory (default: a temporary one).")
	webhookRequests := flag.Int("webhook-requests", 5000, "Requests per client of the admission load test (0 skips it).")
	webhookClients := flag.Int("webhook-clients", 4, "Concurrent clients of the admission load test.")
	from := flag.String("from", "", "Render the report from a results JSON file written by an earlier run instead of running (a relative path is relative to the repository, e.g. docs/bench/results.json).")
	only := flag.String("run", "", "Run only the scenarios whose name matches this regular expression (e.g. n100-c10$); the results are printed, docs are not rewritten.")
	profileDir := flag.String("profile-dir", "", "Save heap profiles of each scenario's manager (all Ready, and after the steady window) in this directory, for go tool pprof (empty: none).")
	memoryLimit := flag.String("manager-memory-limit", "", "Run the managers as in a container with this memory limit (a Kubernetes quantity, e.g. 256Mi): they get the Go soft memory limit the binaries set for it (empty: none).")
	flag.Parse()
	// envtest logs through controller-runtime's logger; the bench prints its own progress.
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if (*only != "" || *set == "webhook") && *from == "" {
		// A partial run must not replace the full report.
		*doc = ""
	}
	opts := bench.Options{Out: os.Stdout, WebhookRequests: *webhookRequests, WebhookClients: *webhookClients, ProfileDir: *profileDir}
	if *memoryLimit != "" {
		q, err := resource.ParseQuantity(*memoryLimit)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -manager-memory-limit=%s: %v (e.g. 256Mi)\n", *memoryLimit, err)
			os.Exit(2)
		}
		opts.ManagerMemoryLimit = q.Value()
	}
	if err := run(ctx, *set, *only, *doc, *charts, *workDir, *from, opts); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, set, only, doc, charts, workDir, from string, opts bench.Options) error {
	// The make targets run this command from its own module (test/bench): paths into the
	// repository are resolved from its root, whatever the working directory.
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	if from != "" {
		if !filepath.IsAbs(from) {
			from = filepath.Join(root, from)
		}
		rep, err := bench.LoadReport(from)
		if err != nil {
			return err
		}
		return write(rep, root, doc, charts)
	}
	var scenarios []bench.Scenario
	switch set {
	case "full":
		scenarios = bench.FullSet()
	case "smoke":
		scenarios = bench.SmokeSet()
	case "webhook":
		if opts.WebhookRequests <= 0 {
			return errors.New("-set=webhook measures nothing with -webhook-requests=0")
		}
	default:
		return fmt.Errorf("-set %q: want full, smoke or webhook", set)
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-run: %w", err)
		}
		scenarios = slices.DeleteFunc(scenarios, func(s bench.Scenario) bool { return !re.MatchString(s.Name) })
		if len(scenarios) == 0 {
			return fmt.Errorf("-run %q matches no scenario of the %s set", only, set)
		}
	}
	if workDir == "" {
		d, err := os.MkdirTemp("", "capov-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		workDir = d
	}
	opts.WorkDir = workDir
	rep, err := bench.RunAll(ctx, scenarios, opts)
	if err != nil {
		return err
	}
	for _, t := range rep.Targets() {
		fmt.Printf("target: %-110s %-70s met=%t\n", t.Goal, t.Measured, t.Met)
	}
	if doc == "" {
		return nil
	}
	if err := rep.Save(filepath.Join(root, charts, "results.json")); err != nil {
		return err
	}
	return write(rep, root, doc, charts)
}

func write(rep *bench.Report, root, doc, charts string) error {
	if err := rep.WriteCharts(filepath.Join(root, charts)); err != nil {
		return err
	}
	// Charts are linked relative to the markdown file.
	rel, err := filepath.Rel(filepath.Dir(filepath.Join(root, doc)), filepath.Join(root, charts))
	if err != nil {
		return err
	}
	return bench.UpdateDoc(filepath.Join(root, doc), rep.Markdown(rel))
}
