// Command images builds CAPOV's OCI images without Docker (`make images`): capov-manager,
// capov-webhook and capov-ovirtsim for linux/amd64 and linux/arm64, each written to
// <out>/<image>.oci.tar (an OCI archive whose index names the image <registry>/<image>:<tag>)
// with its SPDX SBOM in <out>/<image>.spdx.json. Run it from the repository root:
//
//	go run ./test/images/cmd/images --version=v0.2.0 --git-commit=$(git rev-parse HEAD) \
//	    --build-date=2026-12-01T09:00:00Z
//
// The tag defaults to the appVersion of charts/capov, the tag the chart pulls by default.
// See docs/images.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/capov/capov/test/images"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "images:", err)
		}
		os.Exit(1)
	}
}

// run parses the flags, builds the selected images and writes their archives and SBOMs.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "repository root: where go build runs and charts/capov is read")
	out := fs.String("out", "out", "output directory of the archives and SBOMs")
	registry := fs.String("registry", images.DefaultRegistry, "registry and namespace of the image references")
	tag := fs.String("tag", "", "tag of the image references (default: the appVersion of charts/capov)")
	version := fs.String("version", "", "version stamped into the binaries and the labels (default v0.0.0-dev)")
	gitCommit := fs.String("git-commit", "", "commit stamped into the binaries and the labels (default unknown)")
	buildDate := fs.String("build-date", "", "build date stamped into the binaries; RFC 3339 also dates the images (default unknown: the Unix epoch)")
	platforms := fs.String("platforms", strings.Join(images.DefaultPlatforms(), ","), "comma-separated os/arch platforms of every image")
	only := fs.String("images", "", "comma-separated subset of capov-manager, capov-webhook, capov-ovirtsim (default: all)")
	license := fs.String("license", "", "org.opencontainers.image.licenses label, an SPDX expression (default "+images.DefaultLicense+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *tag == "" {
		appVersion, err := images.ChartAppVersion(*root)
		if err != nil {
			return err
		}
		*tag = appVersion
	}
	dir, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	specs := images.Products(images.Spec{
		Registry:  *registry,
		Tag:       *tag,
		Dir:       dir,
		Platforms: strings.Split(*platforms, ","),
		Version:   *version,
		GitCommit: *gitCommit,
		BuildDate: *buildDate,
		License:   *license,
	})
	if *only != "" {
		var selected []images.Spec
		for _, name := range strings.Split(*only, ",") {
			i := slices.IndexFunc(specs, func(s images.Spec) bool { return s.Name == name || s.Name == "capov-"+name })
			if i < 0 {
				return fmt.Errorf("--images: unknown image %q", name)
			}
			selected = append(selected, specs[i])
		}
		specs = selected
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, spec := range specs {
		start := time.Now()
		fmt.Fprintf(stderr, "Building %s (%s)\n", spec.Ref(), *platforms)
		img, err := images.Build(ctx, spec)
		if err != nil {
			return err
		}
		archive := filepath.Join(*out, spec.Name+".oci.tar")
		if err := images.WriteOCIArchive(archive, img); err != nil {
			return err
		}
		sbom := filepath.Join(*out, spec.Name+".spdx.json")
		if err := os.WriteFile(sbom, img.SBOM, 0o644); err != nil {
			return fmt.Errorf("writing the SBOM of %s: %w", spec.Name, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s@%s %s (%s)\n", archive, img.Ref(), digest, sbom, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}
