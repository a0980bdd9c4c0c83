package operator

import (
	"context"
	"fmt"
	"os"
	"path"
	"runtime"
	"time"

	"github.com/capov/capov/test/clusterctl"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/images"
)

const (
	// PreviousRelease is the commit of CAPOV v0.2.0, the release before this tree's (charts and
	// components name its images ghcr.io/capov/<name>:0.2.0).
	PreviousRelease = "6a209b9"
	// PreviousVersion is the version of PreviousRelease (CHANGELOG.md).
	PreviousVersion = "v0.2.0"
	// ThisVersion is the version this tree is released as (CHANGELOG.md).
	ThisVersion = "v0.3.0"
)

// Prebuild builds what the tests of this package build before their node starts, with the
// commands they use, so that their first run finds it in the caches (Go's build cache, and
// harness.CacheDir for the previous release): the previous release's manager and webhook, this
// tree's product images, the Helm test's Cluster API core, Cluster API's managers, the cert-manager stand-in (its image and its
// process) and clusterctl. The binaries it compiles are discarded. .ci/run's prebuild runs it
// at nice 19 while make test runs (cmd/e2e-prebuild). log receives one line per step.
func Prebuild(ctx context.Context, root string, log func(format string, args ...any)) error {
	step := func(what string, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		log("%s: %s", what, time.Since(start).Round(time.Second))
		return nil
	}
	if err := step("CAPOV "+PreviousVersion+" ("+PreviousRelease+")", func() error {
		_, err := harness.BuildRelease(ctx, root, PreviousRelease)
		return err
	}); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "capov-e2e-prebuild-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	platform := "linux/" + runtime.GOARCH
	specs := images.Products(images.Spec{Tag: "prebuild", Dir: root, Platforms: []string{platform}})
	specs = append(specs,
		images.Spec{Name: "capov-capi-core", Tag: "prebuild", Dir: root, Package: "./test/capi/cmd/capi-core",
			Binary: "/capi-core", Platforms: []string{platform}},
		images.Spec{Name: "cert-manager-stand-in", Tag: "prebuild", Dir: root, Package: "./test/certmanager/cmd/cert-manager",
			Binary: "/cert-manager", Platforms: []string{platform}})
	for _, pkg := range clusterctl.CAPIPackages() {
		specs = append(specs, images.Spec{Name: path.Base(pkg), Tag: "prebuild", Dir: root, Package: pkg,
			Binary: "/manager", Platforms: []string{platform}})
	}
	for _, s := range specs {
		if err := step("image binary "+s.Package, func() error {
			_, err := images.Compile(ctx, s, platform, dir)
			return err
		}); err != nil {
			return err
		}
	}
	if err := step("the cert-manager stand-in's process", func() error {
		_, err := clusterctl.BuildStandIn(ctx, root, dir)
		return err
	}); err != nil {
		return err
	}
	return step("clusterctl", func() error {
		_, err := clusterctl.Binary(root)
		return err
	})
}
