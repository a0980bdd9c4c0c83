package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/capov/capov/test/envtest"
)

// TestChaos runs the scenarios (CHAOS=short: the short ones; CHAOS=long: all) for every seed on
// a stack of its own. The baseline runs first, outside the subtests, so that a single scenario
// can be run alone (-run 'TestChaos/seed-1/engine-errors$') with its reference rates.
func TestChaos(t *testing.T) {
	cfg, ok, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if from := os.Getenv("CHAOS_FROM"); from != "" {
		renderFrom(t, from, cfg.Doc)
		return
	}
	if !ok {
		t.Skip("the chaos suite runs with CHAOS=short (make chaos-short, part of make test) or CHAOS=long (make chaos)")
	}
	// Cluster API's reconcilers log through the logger StartWorld gives them; envtest and
	// controller-runtime's own helpers would warn that no global logger is set.
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-30*time.Second))
		defer cancel()
	}
	rep := NewReport(cfg)
	all := Scenarios()
	for _, seed := range cfg.Seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			workDir, err := os.MkdirTemp("", fmt.Sprintf("capov-chaos-%d-", seed))
			if err != nil {
				t.Fatal(err)
			}
			w, err := StartWorld(ctx, cfg, seed, workDir, t.Logf)
			if err != nil {
				t.Fatalf("starting the stack for seed %d: %v (logs in %s)", seed, err, workDir)
			}
			defer func() {
				w.Stop()
				if t.Failed() || os.Getenv("CAPOV_KEEP_LOGS") != "" {
					t.Logf("seed %d: logs kept in %s", seed, filepath.Join(workDir, "logs"))
				} else {
					_ = os.RemoveAll(workDir)
				}
			}()
			base := Execute(ctx, w, all[0])
			rep.Results = append(rep.Results, base)
			if !base.Passed() {
				t.Errorf("baseline:\n%s", w.Describe(base))
			}
			for _, s := range all[1:] {
				if cfg.Mode == ModeShort && !s.Short {
					continue
				}
				t.Run(s.Name, func(t *testing.T) {
					res := Execute(ctx, w, s)
					rep.Results = append(rep.Results, res)
					if !res.Passed() {
						t.Error(w.Describe(res))
					}
				})
			}
		})
	}
	rep.Elapsed = time.Since(rep.Started)
	want := 0
	for _, s := range all {
		if cfg.Mode == ModeLong || s.Short {
			want++
		}
	}
	complete := len(rep.Results) == want*len(cfg.Seeds)
	if cfg.Report != "" {
		if err := rep.Save(cfg.Report); err != nil {
			t.Error(err)
		}
	}
	if cfg.Doc != "" {
		if !complete {
			t.Logf("not rewriting %s: %d of %d runs happened (a -run filter?)", cfg.Doc, len(rep.Results), want*len(cfg.Seeds))
			return
		}
		writeDoc(t, rep, cfg.Doc)
	}
}

// renderFrom rewrites the matrix from a saved report (CHAOS_FROM, written with CHAOS_REPORT)
// without running anything: for a change of the rendering.
func renderFrom(t *testing.T, from, doc string) {
	rep, err := LoadReport(from)
	if err != nil {
		t.Fatal(err)
	}
	if doc == "" {
		t.Fatal("CHAOS_FROM needs CHAOS_DOC, the Markdown file to rewrite")
	}
	writeDoc(t, rep, doc)
}

func writeDoc(t *testing.T, rep *Report, doc string) {
	if !filepath.IsAbs(doc) {
		root, err := envtest.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		doc = filepath.Join(root, doc)
	}
	if err := UpdateDoc(doc, rep.Markdown()); err != nil {
		t.Error(err)
	}
	t.Logf("wrote the matrix into %s", doc)
}
