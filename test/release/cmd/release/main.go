// Command release builds a CAPOV release into <out>/<version>/ (`make release
// VERSION=vX.Y.Z`): images, clusterctl assets, charts, release notes and checksums. Run it from
// the repository root:
//
//	go run ./test/release/cmd/release --version=v0.3.0
//
// See docs/releasing.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/capov/capov/test/images"
	"github.com/capov/capov/test/release"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "release:", err)
		}
		os.Exit(1)
	}
}

// run parses the flags and builds the release.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "repository root")
	out := fs.String("out", "out/release", "parent directory: the release goes to <out>/<version>")
	version := fs.String("version", "", "release version vMAJOR.MINOR.PATCH[-PRERELEASE] (required)")
	registry := fs.String("registry", images.DefaultRegistry, "registry and namespace of the images")
	gitCommit := fs.String("git-commit", "", "commit stamped into the binaries (default: HEAD)")
	buildDate := fs.String("build-date", "", "RFC 3339 build date of the binaries, images and chart archives (default: SOURCE_DATE_EPOCH, else HEAD's committer date)")
	platforms := fs.String("platforms", strings.Join(images.DefaultPlatforms(), ","), "comma-separated os/arch platforms of every image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *version == "" {
		return errors.New("--version is required, e.g. --version=v0.3.0")
	}
	res, err := release.Build(ctx, release.Options{
		Root:      *root,
		Out:       *out,
		Version:   *version,
		Registry:  *registry,
		GitCommit: *gitCommit,
		BuildDate: *buildDate,
		Platforms: strings.Split(*platforms, ","),
		Log:       stderr,
	})
	if err != nil {
		return err
	}
	for _, f := range res.Files {
		fmt.Fprintln(stdout, res.Dir+"/"+f)
	}
	return nil
}
