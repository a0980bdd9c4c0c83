package release_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capov/capov/test/images"
	"github.com/capov/capov/test/release"
)

// testPlatforms are the platforms the tests build the images for: make release builds both
// default platforms, the tests one (test/images covers the others), which halves the cost of
// the one release build the tests share.
var testPlatforms = []string{"linux/amd64"}

var (
	// root is the repository root.
	root string
	// scratch holds every release the tests build; TestMain removes it.
	scratch string

	builtOnce sync.Once
	built     *release.Result
	builtErr  error

	// imageCache memoizes built images by reference, so that a second release of the same
	// inputs in this process reuses them (their reproducibility is test/images' subject).
	imageMu    sync.Mutex
	imageCache = map[string]*images.Image{}
)

func TestMain(m *testing.M) {
	var err error
	if root, err = repoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if scratch, err = os.MkdirTemp("", "capov-release-test-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(scratch)
	os.Exit(code)
}

// repoRoot finds the repository root (the directory with go.work) above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root not found: no go.work above the working directory")
		}
		dir = parent
	}
}

// cachedBuild builds an image once per reference and stamps.
func cachedBuild(ctx context.Context, spec images.Spec) (*images.Image, error) {
	imageMu.Lock()
	defer imageMu.Unlock()
	key := strings.Join([]string{spec.Registry, spec.Name, spec.Tag, spec.Version, spec.GitCommit, spec.BuildDate, strings.Join(spec.Platforms, ",")}, "|")
	if img, ok := imageCache[key]; ok {
		return img, nil
	}
	img, err := images.Build(ctx, spec)
	if err != nil {
		return nil, err
	}
	imageCache[key] = img
	return img, nil
}

// testVersion is the version the tests release: the newest section of CHANGELOG.md, so that
// they follow the next release as soon as its entries are written.
func testVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[v?([0-9][^\]]*)\]`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release section")
	}
	return "v" + string(m[1])
}

// options are the options of the tests' releases, written under out.
func options(t *testing.T, out string) release.Options {
	t.Helper()
	return release.Options{
		Root:       root,
		Out:        out,
		Version:    testVersion(t),
		Platforms:  testPlatforms,
		BuildImage: cachedBuild,
		Log:        testWriter{t},
	}
}

// shared returns the release the tests share, built once per process.
func shared(t *testing.T) *release.Result {
	t.Helper()
	builtOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		built, builtErr = release.Build(ctx, options(t, filepath.Join(scratch, "a")))
	})
	if builtErr != nil {
		t.Fatalf("building the release: %v", builtErr)
	}
	return built
}

// testWriter logs each line it is given to the test.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// tool returns the binary of envVar (make exports HELM and CLUSTERCTL), or builds it with the
// hack/ script as test/charts does.
func tool(t *testing.T, envVar, script string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", script))
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/%s: %v", script, err)
	}
	return strings.TrimSpace(string(out))
}

// run runs a command in the repository root and returns its standard output.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
