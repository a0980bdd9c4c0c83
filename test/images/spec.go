package images

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"
)

const (
	// DefaultRegistry is where the charts pull the images from (image.repository and
	// webhook.image.repository of charts/capov without the image name).
	DefaultRegistry = "ghcr.io/capov"
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/capov/capov"
	// DefaultLicense is the org.opencontainers.image.licenses label when Spec.License is
	// empty: the repository declares no licence, and NOASSERTION is SPDX's word for that.
	DefaultLicense = "NOASSERTION"

	// ldflagsTemplate is the Makefile's LDFLAGS, character for character (a test compares
	// them); ${VERSION}, ${GIT_COMMIT} and ${BUILD_DATE} are the stamps.
	ldflagsTemplate = "-s -w -X github.com/capov/capov/pkg/version.gitVersion=${VERSION} -X github.com/capov/capov/pkg/version.gitCommit=${GIT_COMMIT} -X github.com/capov/capov/pkg/version.buildDate=${BUILD_DATE}"
)

// Spec describes one image: a Go main package built for every platform, on the
// distroless-compatible base, run as the nonroot user.
type Spec struct {
	// Name is the image name without registry and tag, e.g. "capov-manager". It is also the
	// org.opencontainers.image.title label and names the output files.
	Name string
	// Registry is the reference's registry and namespace (default DefaultRegistry).
	Registry string
	// Tag is the reference's tag, e.g. "0.2.0" (required; ChartAppVersion gives the one the
	// chart pulls by default).
	Tag string

	// Package is the Go main package, as `go build` takes it: "./cmd/manager" relative to
	// Dir, or a full import path.
	Package string
	// Dir is the directory `go build` runs in, inside the module (default: the current one).
	Dir string
	// Binary is the binary's absolute path in the image, e.g. "/manager" (the Dockerfiles'
	// COPY destination).
	Binary string
	// Entrypoint is the image's ENTRYPOINT (default: [Binary]).
	Entrypoint []string

	// Platforms are "os/arch[/variant]" strings (default DefaultPlatforms). An arm64 platform
	// without variant gets "v8", as distroless's do.
	Platforms []string

	// Version, GitCommit and BuildDate are stamped into pkg/version through LDFlags and
	// shown in the labels (defaults: the Dockerfiles' build-arg defaults v0.0.0-dev, unknown,
	// unknown). A BuildDate in RFC 3339 is also the image's creation time; otherwise the
	// image is dated at the Unix epoch.
	Version, GitCommit, BuildDate string
	// LDFlags are the -ldflags of `go build` (default: the Makefile's LDFLAGS with the three
	// stamps, see LDFlags).
	LDFlags string

	// License is the org.opencontainers.image.licenses label (default DefaultLicense).
	License string
	// Labels are added to the OCI labels, and win over them.
	Labels map[string]string
}

// DefaultPlatforms are the platforms of every image unless Spec.Platforms says otherwise.
func DefaultPlatforms() []string { return []string{"linux/amd64", "linux/arm64"} }

// LDFlags returns the Makefile's LDFLAGS with the three version stamps filled in.
func LDFlags(version, gitCommit, buildDate string) string {
	return os.Expand(ldflagsTemplate, func(k string) string {
		return map[string]string{"VERSION": version, "GIT_COMMIT": gitCommit, "BUILD_DATE": buildDate}[k]
	})
}

// Products returns the specs of the product images: capov-manager, capov-webhook (the
// Dockerfiles' images) and capov-ovirtsim (the oVirt simulator, for end-to-end tests on a
// real cluster). Every other field comes from common.
func Products(common Spec) []Spec {
	products := []struct{ name, pkg, binary string }{
		{"capov-manager", "./cmd/manager", "/manager"},
		{"capov-webhook", "./cmd/webhook", "/webhook"},
		{"capov-ovirtsim", "./test/ovirtsim/cmd/ovirtsim", "/ovirtsim"},
	}
	specs := make([]Spec, 0, len(products))
	for _, p := range products {
		s := common
		s.Name, s.Package, s.Binary, s.Entrypoint = p.name, p.pkg, p.binary, nil
		specs = append(specs, s)
	}
	return specs
}

// ChartAppVersion returns the appVersion of charts/capov under root: the tag the chart pulls
// when manager.tag and webhook.image.tag are empty (charts/capov/templates/_helpers.tpl).
func ChartAppVersion(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "charts", "capov", "Chart.yaml"))
	if err != nil {
		return "", fmt.Errorf("reading the chart's appVersion: %w", err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", fmt.Errorf("parsing charts/capov/Chart.yaml: %w", err)
	}
	if chart.AppVersion == "" {
		return "", fmt.Errorf("charts/capov/Chart.yaml has no appVersion")
	}
	return chart.AppVersion, nil
}

// withDefaults returns the spec with its defaults filled in, or why it cannot be built.
func (s Spec) withDefaults() (Spec, error) {
	if s.Name == "" || s.Package == "" || s.Tag == "" {
		return s, fmt.Errorf("image spec %q: Name, Package and Tag are required", s.Name)
	}
	if !strings.HasPrefix(s.Binary, "/") || path.Clean(s.Binary) != s.Binary || s.Binary == "/" {
		return s, fmt.Errorf("image spec %s: Binary %q must be a clean absolute path", s.Name, s.Binary)
	}
	if s.Registry == "" {
		s.Registry = DefaultRegistry
	}
	if len(s.Entrypoint) == 0 {
		s.Entrypoint = []string{s.Binary}
	}
	if len(s.Platforms) == 0 {
		s.Platforms = DefaultPlatforms()
	}
	if s.Version == "" {
		s.Version = "v0.0.0-dev"
	}
	if s.GitCommit == "" {
		s.GitCommit = "unknown"
	}
	if s.BuildDate == "" {
		s.BuildDate = "unknown"
	}
	if s.LDFlags == "" {
		s.LDFlags = LDFlags(s.Version, s.GitCommit, s.BuildDate)
	}
	if s.License == "" {
		s.License = DefaultLicense
	}
	if _, err := name.NewTag(s.Ref(), name.StrictValidation); err != nil {
		return s, fmt.Errorf("image spec %s: reference %q: %w", s.Name, s.Ref(), err)
	}
	seen := map[string]bool{}
	for _, p := range s.Platforms {
		pl, err := parsePlatform(p)
		if err != nil {
			return s, fmt.Errorf("image spec %s: %w", s.Name, err)
		}
		if seen[pl.String()] {
			return s, fmt.Errorf("image spec %s: platform %s given twice", s.Name, pl)
		}
		seen[pl.String()] = true
	}
	return s, nil
}

// Ref is the image's full reference, <Registry>/<Name>:<Tag>, e.g.
// "ghcr.io/capov/capov-manager:0.2.0": the name containerd, skopeo and crane know it by.
func (s Spec) Ref() string {
	registry := s.Registry
	if registry == "" {
		registry = DefaultRegistry
	}
	return registry + "/" + s.Name + ":" + s.Tag
}

// parsePlatform parses "os/arch[/variant]"; arm64 defaults to variant v8.
func parsePlatform(s string) (v1.Platform, error) {
	p, err := v1.ParsePlatform(s)
	if err != nil {
		return v1.Platform{}, fmt.Errorf("platform %q: %w", s, err)
	}
	if p.OS == "" || p.Architecture == "" || p.OSVersion != "" || len(p.Features) > 0 {
		return v1.Platform{}, fmt.Errorf("platform %q: want os/arch[/variant]", s)
	}
	if p.Architecture == "arm64" && p.Variant == "" {
		p.Variant = "v8"
	}
	return *p, nil
}
