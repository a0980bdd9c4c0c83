package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Release is a previous CAPOV release built from the repository history: its source tree
// (config/, charts/, metadata.yaml) and its manager and webhook binaries.
type Release struct {
	// Commit is the full commit id.
	Commit string
	// Src is the commit's tree (git archive).
	Src string
	// Manager and Webhook are the binaries of ./cmd/manager and ./cmd/webhook.
	Manager, Webhook string
}

// CacheDir is the directory of build results kept across runs and clones, as hack/lib/cache.sh
// names it: CAPOV_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/capov.
func CacheDir() (string, error) {
	if d := os.Getenv("CAPOV_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "capov"), nil
}

// BuildRelease builds the manager and webhook of a commit of the repository at root, once per
// machine: the tree and the binaries are kept in <CacheDir>/releases/<commit>, written complete
// by a rename, so an interrupted build never leaves an entry and two packages building at once
// both end with a complete one. A commit is immutable, so an entry never goes stale.
func BuildRelease(ctx context.Context, root, commit string) (*Release, error) {
	full, err := gitOutput(ctx, root, "rev-parse", "--verify", commit+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("resolving %s (the tests need the repository history: a full clone): %w", commit, err)
	}
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, "releases", full)
	r := &Release{Commit: full, Src: filepath.Join(dir, "src"),
		Manager: filepath.Join(dir, "bin", "manager"), Webhook: filepath.Join(dir, "bin", "webhook")}
	if _, err := os.Stat(r.Webhook); err == nil {
		return r, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), full+".build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if err := extractCommit(ctx, root, full, src); err != nil {
		return nil, err
	}
	for _, name := range []string{"manager", "webhook"} {
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(tmp, "bin", name), "./cmd/"+name)
		build.Dir = src
		build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false -trimpath", "GOWORK="+filepath.Join(src, "go.work"))
		if b, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the %s of %s: %w\n%s", name, commit, err, b)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(r.Webhook); statErr == nil {
			return r, nil // another package built it meanwhile
		}
		return nil, err
	}
	return r, nil
}

func extractCommit(ctx context.Context, root, commit, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", commit)
	var tarball, stderr bytes.Buffer
	archive.Stdout, archive.Stderr = &tarball, &stderr
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s (the tests need the repository history: a full clone): %w\n%s", commit, err, stderr.String())
	}
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	untar.Stdin = &tarball
	if out, err := untar.CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %w\n%s", err, out)
	}
	return nil
}

func gitOutput(ctx context.Context, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", root}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", errors.Join(err, errors.New(strings.TrimSpace(stderr.String())))
	}
	return strings.TrimSpace(string(out)), nil
}
