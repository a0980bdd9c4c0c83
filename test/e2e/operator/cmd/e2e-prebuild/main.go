// Command e2e-prebuild builds what make e2e's install and upgrade tests (test/e2e/operator)
// build before their node starts, so that they find it cached: .ci/run's prebuild
// (hack/ci-prebuild.sh) runs it at nice 19 while make test runs. It needs the repository's
// history (a full clone) and writes nothing but Go's build cache and the release cache
// (CAPOV_CACHE_DIR).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/capov/capov/test/e2e/operator"
	"github.com/capov/capov/test/envtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-prebuild:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	return operator.Prebuild(ctx, root, func(format string, args ...any) {
		fmt.Printf("e2e-prebuild: "+format+"\n", args...)
	})
}
