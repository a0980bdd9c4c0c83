// Command bench runs the CAPOV provisioning benchmark (see test/bench) and writes
// docs/benchmarks.md and its charts. `make bench` runs the full set; -set=smoke a small one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"syscall"

	"github.com/capov/capov/test/bench"
	"github.com/capov/capov/test/envtest"
)

func main() {
	set := flag.String("set", "full", "Scenario set: full or smoke.")
	doc := flag.String("doc", "docs/benchmarks.md", "Markdown file whose generated section is rewritten (empty: do not write).")
	charts := flag.String("charts", "docs/bench", "Directory for the PNG charts, relative to the repository.")
	workDir := flag.String("work-dir", "", "Work directory (default: a temporary one).")
	webhookRequests := flag.Int("webhook-requests", 5000, "Requests per client of the admission load test (0 skips it).")
	from := flag.String("from", "", "Render the report from a results JSON file written by an earlier run instead of running.")
	only := flag.String("run", "", "Run only the scenarios whose name matches this regular expression (e.g. n100-c10$); the results are printed, docs are not rewritten.")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *only != "" && *from == "" {
		// A partial run must not replace the full report.
		*doc = ""
	}
	if err := run(ctx, *set, *only, *doc, *charts, *workDir, *webhookRequests, *from); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, set, only, doc, charts, workDir string, webhookRequests int, from string) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	if from != "" {
		rep, err := bench.LoadReport(from)
		if err != nil {
			return err
		}
		return write(rep, root, doc, charts)
	}
	scenarios := bench.FullSet()
	if set == "smoke" {
		scenarios = bench.SmokeSet()
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
	rep, err := bench.RunAll(ctx, scenarios, bench.Options{WorkDir: workDir, Out: os.Stdout, WebhookRequests: webhookRequests})
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
