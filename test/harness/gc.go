package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// gcAssetsDir returns the directory of the kube-controller-manager binary: GC_ASSETS when it
// holds one, else what hack/gc-assets.sh builds (once; cached).
func gcAssetsDir(ctx context.Context, root string) (string, error) {
	if dir := os.Getenv("GC_ASSETS"); dir != "" {
		if st, err := os.Stat(filepath.Join(dir, "kube-controller-manager")); err == nil && st.Mode()&0o111 != 0 {
			return dir, nil
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "gc-assets.sh"))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building kube-controller-manager with hack/gc-assets.sh: %w: %s", err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	_ = os.Setenv("GC_ASSETS", dir) // the next stack of this process finds it at once
	return dir, nil
}

// startGarbageCollector runs Kubernetes' garbage collector (kube-controller-manager with only
// that controller) against the management cluster, as every real cluster has it: the dependents
// of a deleted owner are deleted (background propagation), so a suite sees what users see when
// an owner goes early, not objects that no real cluster keeps. It returns once the collector's
// resource monitors synced (it then knows every kind, CAPOV's and Cluster API's included).
func (s *Stack) startGarbageCollector(ctx context.Context, root string) error {
	dir, err := gcAssetsDir(ctx, root)
	if err != nil {
		return err
	}
	p, err := Start("garbage-collector", filepath.Join(dir, "kube-controller-manager"), []string{
		"--kubeconfig=" + s.KubeconfigPath,
		"--controllers=garbage-collector-controller",
		"--leader-elect=false",
		"--secure-port=0", // it serves nothing the suites read
		"--concurrent-gc-syncs=5",
		"--v=2",
	}, nil, filepath.Join(s.opts.WorkDir, "logs", "garbage-collector.log"))
	if err != nil {
		return err
	}
	s.GC = p
	deadline := time.Now().Add(90 * time.Second)
	for !p.LogContains("synced garbage collector") && !p.LogContains("All resource monitors have synced") {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("the garbage collector exited: %w: %s", err, Tail(p.Logs(), 20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the garbage collector did not sync its resource monitors within 90s: %s", Tail(p.Logs(), 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
