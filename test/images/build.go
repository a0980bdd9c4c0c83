package images

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image is an assembled multi-platform image and its SBOM.
type Image struct {
	// Spec is the spec the image was assembled from, with its defaults filled in.
	Spec Spec
	// Index is the OCI image index: one image manifest per platform, in Spec.Platforms order,
	// then one SBOM artifact per platform image (platform unknown/unknown, subject: that
	// image).
	Index v1.ImageIndex
	// SBOM is the SPDX 2.3 JSON document of the image's binaries and their Go modules.
	SBOM []byte
}

// Ref is the image's full reference, e.g. "ghcr.io/capov/capov-manager:0.2.0".
func (img *Image) Ref() string { return img.Spec.Ref() }

// Digest is the digest of the image index: what `crane digest` and containerd report for
// the reference.
func (img *Image) Digest() (v1.Hash, error) { return img.Index.Digest() }

// Build compiles spec.Package for every platform, in a temporary directory removed
// afterwards, and assembles the image (Compile, then Assemble).
func Build(ctx context.Context, spec Spec) (*Image, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "capov-images-")
	if err != nil {
		return nil, fmt.Errorf("building %s: %w", spec.Name, err)
	}
	defer os.RemoveAll(dir)
	binaries := map[string]string{}
	for _, p := range spec.Platforms {
		bin, err := Compile(ctx, spec, p, dir)
		if err != nil {
			return nil, err
		}
		binaries[p] = bin
	}
	return Assemble(ctx, spec, binaries)
}

// Compile builds spec.Package for one platform ("linux/arm64") into dir and returns the
// binary's path. The command is the Dockerfiles' and `make build`'s: CGO_ENABLED=0,
// GOFLAGS=-buildvcs=false, GOWORK=off (the product module alone), `go build -trimpath
// -ldflags "<LDFLAGS>"`, with GOOS and GOARCH (and GOARM for arm/v6, arm/v7) of the platform.
func Compile(ctx context.Context, spec Spec, platform, dir string) (string, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return "", err
	}
	p, err := parsePlatform(platform)
	if err != nil {
		return "", err
	}
	out, err := filepath.Abs(filepath.Join(dir, strings.NewReplacer("/", "-").Replace(spec.Name+"-"+p.String())))
	if err != nil {
		return "", fmt.Errorf("compiling %s for %s: %w", spec.Name, p, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", spec.LDFlags, "-o", out, spec.Package)
	cmd.Dir = spec.Dir
	cmd.Env = append(os.Environ(), buildEnv(p)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling %s for %s (%s): %w\n%s", spec.Package, p, strings.Join(buildEnv(p), " "), err, b)
	}
	return out, nil
}

// buildEnv is the environment of `go build` for a platform (added last, so it wins over the
// caller's).
func buildEnv(p v1.Platform) []string {
	env := []string{"CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off", "GOOS=" + p.OS, "GOARCH=" + p.Architecture}
	if p.Architecture == "arm" && p.Variant != "" {
		env = append(env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	return env
}

// Assemble assembles the image from binaries already built, one per platform of the spec
// (keys as in Spec.Platforms): two layers per platform, the distroless-compatible base
// (shared by every platform and image) and the binary at Spec.Binary (root-owned, 0755);
// then the SBOM of all the binaries, attached to each platform image as an OCI 1.1 artifact
// manifest (artifactType application/spdx+json, subject: the platform image) listed in the
// index itself, so that every copy of the index (crane push, skopeo copy --all, ctr import)
// carries it and a registry's referrers API lists it. The subject cannot be the index: the
// index lists the artifact. The binaries are read, not kept: the image holds its compressed
// layers in memory.
func Assemble(ctx context.Context, spec Spec, binaries map[string]string) (*Image, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	ca, err := caBundle()
	if err != nil {
		return nil, err
	}
	base, err := newLayer(baseEntries(ca))
	if err != nil {
		return nil, fmt.Errorf("assembling the base layer: %w", err)
	}
	created := creationTime(spec.BuildDate)
	labels := ociLabels(spec)

	var (
		built []builtBinary
		adds  []mutate.IndexAddendum
	)
	for _, platform := range spec.Platforms {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("assembling %s: %w", spec.Name, err)
		}
		p, err := parsePlatform(platform)
		if err != nil {
			return nil, err
		}
		binPath, ok := binaries[platform]
		if !ok {
			return nil, fmt.Errorf("assembling %s: no binary for %s", spec.Name, platform)
		}
		bin, err := inspectBinary(binPath, p)
		if err != nil {
			return nil, fmt.Errorf("assembling %s for %s: %w", spec.Name, p, err)
		}
		top, err := newLayer([]entry{{name: spec.Binary[1:], mode: 0o755, src: binPath}})
		if err != nil {
			return nil, fmt.Errorf("assembling the %s layer of %s: %w", p, spec.Name, err)
		}
		pimg, err := platformImage(spec, p, created, labels, base, top)
		if err != nil {
			return nil, fmt.Errorf("assembling %s for %s: %w", spec.Name, p, err)
		}
		img := runnableImage{pimg}
		if bin.manifest, err = partial.Descriptor(img); err != nil {
			return nil, fmt.Errorf("assembling %s for %s: %w", spec.Name, p, err)
		}
		bin.manifest.Platform = &p
		built = append(built, bin)
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}

	sbom, err := spdxDocument(spec, created, built, ca)
	if err != nil {
		return nil, fmt.Errorf("writing the SBOM of %s: %w", spec.Name, err)
	}
	for _, b := range built {
		subject := *b.manifest
		subject.Platform = nil
		art, err := sbomArtifact(sbom, subject, created, spec.Name+".spdx.json")
		if err != nil {
			return nil, fmt.Errorf("attaching the SBOM of %s to its %s image: %w", spec.Name, b.platform, err)
		}
		// The platform unknown/unknown keeps platform-selecting clients (containerd, the
		// kubelet, docker pull) from choosing or fetching the artifact, as for BuildKit's
		// attestations in Docker Hub images.
		adds = append(adds, mutate.IndexAddendum{Add: art, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"},
		}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	annotated, ok := mutate.Annotations(idx, labels).(v1.ImageIndex)
	if !ok {
		return nil, fmt.Errorf("assembling %s: annotating the index", spec.Name)
	}
	return &Image{Spec: spec, Index: annotated, SBOM: sbom}, nil
}

// runnableImage is an image manifest that is no artifact: its descriptors carry no
// artifactType (go-containerregistry would otherwise put the config media type there, which
// image indexes built by Docker or BuildKit do not).
type runnableImage struct{ v1.Image }

// ArtifactType is empty: a runnable image.
func (runnableImage) ArtifactType() (string, error) { return "", nil }

// platformImage is the image of one platform: config, base layer, binary layer.
func platformImage(spec Spec, p v1.Platform, created time.Time, labels map[string]string, base, top v1.Layer) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      v1.Time{Time: created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       User,
			Env:        Env(),
			Entrypoint: spec.Entrypoint,
			WorkingDir: WorkingDir,
			Labels:     maps.Clone(labels),
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "test/images: the gcr.io/distroless/static-debian12:nonroot layout (passwd, group, nsswitch.conf, CA bundle, /home/nonroot, /root, /tmp)",
		}},
		mutate.Addendum{Layer: top, History: v1.History{
			Created: v1.Time{Time: created},
			CreatedBy: fmt.Sprintf("COPY %s %s # %s go build -trimpath -ldflags %q %s",
				path.Base(spec.Binary), spec.Binary, strings.Join(buildEnv(p), " "), spec.LDFlags, spec.Package),
		}},
	)
}

// creationTime is the BUILD_DATE when it is RFC 3339, else the Unix epoch (as
// SOURCE_DATE_EPOCH=0): never the clock, so that the same inputs give the same digests.
func creationTime(buildDate string) time.Time {
	if t, err := time.Parse(time.RFC3339, buildDate); err == nil {
		return t.UTC()
	}
	return time.Unix(0, 0).UTC()
}

// ociLabels are the image's labels, also the index's annotations.
func ociLabels(spec Spec) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    spec.Name,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.version":  spec.Version,
		"org.opencontainers.image.revision": spec.GitCommit,
		"org.opencontainers.image.licenses": spec.License,
	}
	if t, err := time.Parse(time.RFC3339, spec.BuildDate); err == nil {
		l["org.opencontainers.image.created"] = t.UTC().Format(time.RFC3339)
	}
	maps.Copy(l, spec.Labels)
	return l
}

// builtBinary is what the SBOM records of one platform's binary.
type builtBinary struct {
	platform v1.Platform
	sha256   string
	info     *buildinfo.BuildInfo
	// manifest is the descriptor of the platform's image manifest.
	manifest *v1.Descriptor
}

// inspectBinary reads the binary's Go build information and checks that it was built for
// the platform, static and trimmed, as Compile builds it: Assemble takes binaries from the
// caller, and an image must not claim a platform its binary does not run on.
func inspectBinary(file string, p v1.Platform) (builtBinary, error) {
	info, err := buildinfo.ReadFile(file)
	if err != nil {
		return builtBinary{}, fmt.Errorf("reading the Go build information of %s: %w", file, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, want := range map[string]string{"GOOS": p.OS, "GOARCH": p.Architecture, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != want {
			return builtBinary{}, fmt.Errorf("%s was built with %s=%q, want %q", file, k, settings[k], want)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		return builtBinary{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return builtBinary{}, fmt.Errorf("hashing %s: %w", file, err)
	}
	return builtBinary{platform: p, sha256: fmt.Sprintf("%x", h.Sum(nil)), info: info}, nil
}
