package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/capov/capov/test/harness"
)

// profiler takes heap profiles of the manager of one scenario through --profiler-address.
type profiler struct {
	dir, scenario, addr string
}

// newProfiler returns the profiler of a scenario (the manager binds its pprof endpoint on port
// 0 and reports it: started); nil without a dir.
func newProfiler(dir, scenario string) (*profiler, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the profile directory: %w", err)
	}
	return &profiler{dir: dir, scenario: scenario}, nil
}

// args are the manager flags that serve pprof.
func (p *profiler) args() []string {
	if p == nil {
		return nil
	}
	return []string{"--profiler-address=127.0.0.1:0"}
}

// started reads the pprof address the manager bound (port 0) from its log.
func (p *profiler) started(ctx context.Context, proc *harness.Process) error {
	if p == nil {
		return nil
	}
	addr, err := harness.ReportedServerAddress(ctx, proc, "pprof")
	if err != nil {
		return err
	}
	p.addr = addr
	return nil
}

// heap saves the live heap (after a GC: what the manager keeps, not garbage) as
// <dir>/<scenario>-<moment>.heap.pb.gz, for `go tool pprof`.
func (p *profiler) heap(ctx context.Context, moment string) (string, error) {
	if p == nil {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetching the heap profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetching the heap profile: %s", resp.Status)
	}
	path := filepath.Join(p.dir, p.scenario+"-"+moment+".heap.pb.gz")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, f.Close()
}
