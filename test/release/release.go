package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/capov/capov/test/images"
)

// File names inside a release directory.
const (
	ComponentsFile = "infrastructure-components.yaml"
	MetadataFile   = "metadata.yaml"
	ChecksumsFile  = "checksums.txt"
	NotesFile      = "RELEASE-NOTES.md"
)

// ChartNames are the charts a release packages, the CRD chart first (the install order).
var ChartNames = []string{"capov-crds", "capov"}

// componentImages are the images infrastructure-components.yaml and the capov chart run; the
// release also ships capov-ovirtsim, which nothing in them references.
var componentImages = []string{"capov-manager", "capov-webhook"}

// versionPattern is a semantic version with the v prefix clusterctl requires of a release
// tag. Build metadata (+...) is refused: an image tag cannot carry a '+'.
var versionPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// Options describe one release build.
type Options struct {
	// Root is the repository root.
	Root string
	// Out is the parent directory: the release is written to <Out>/<Version>, which is emptied
	// first.
	Out string
	// Version is the release version, vMAJOR.MINOR.PATCH[-PRERELEASE]. The charts get it
	// without the v (Helm's convention), as do the image tags.
	Version string
	// Registry is the registry and namespace of the images (default images.DefaultRegistry,
	// where the chart's values pull from).
	Registry string
	// GitCommit and BuildDate are stamped into the binaries and the image labels; BuildDate
	// (RFC 3339) also dates the images and the chart archives' entries. Defaults: the commit
	// of HEAD and its committer date (SourceStamps), so that two builds of a commit agree.
	GitCommit, BuildDate string
	// Platforms of every image (default images.DefaultPlatforms).
	Platforms []string
	// Kubectl builds config/default with `kubectl kustomize` (default: kubectl on PATH).
	Kubectl string
	// BuildImage builds one image (default images.Build). Tests pass a memoizing builder to
	// build the images of two releases once.
	BuildImage func(context.Context, images.Spec) (*images.Image, error)
	// Log receives one line per step (default: discarded).
	Log io.Writer
}

// Result is what Build wrote.
type Result struct {
	// Dir is the release directory.
	Dir string
	// Files are the names of every file in Dir, sorted.
	Files []string
	// Images maps each image name (capov-manager, ...) to its reference pinned by digest,
	// <registry>/<name>:<tag>@sha256:<digest>.
	Images map[string]string
	// Duration is how long the build took.
	Duration time.Duration
}

// ChartVersion returns the chart version and image tag of a release version: the version
// without its v, as Helm charts and the charts' appVersion spell it.
func ChartVersion(version string) (string, error) {
	if !versionPattern.MatchString(version) {
		return "", fmt.Errorf("version %q is not a semantic version vMAJOR.MINOR.PATCH[-PRERELEASE] (e.g. v0.3.0)", version)
	}
	return strings.TrimPrefix(version, "v"), nil
}

// SeriesOf returns the major and minor number of a release version, its clusterctl series.
func SeriesOf(version string) (major, minor int32, err error) {
	m := versionPattern.FindStringSubmatch(version)
	if m == nil {
		return 0, 0, fmt.Errorf("version %q is not a semantic version vMAJOR.MINOR.PATCH", version)
	}
	ma, err := strconv.ParseInt(m[1], 10, 32)
	if err != nil {
		return 0, 0, err
	}
	mi, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return 0, 0, err
	}
	return int32(ma), int32(mi), nil
}

// SourceStamps returns the commit of HEAD and a reproducible build date: SOURCE_DATE_EPOCH
// when set (the reproducible-builds convention), else HEAD's committer date, in UTC RFC 3339.
func SourceStamps(root string) (commit, date string, err error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if commit, err = git("rev-parse", "HEAD"); err != nil {
		return "", "", err
	}
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		s, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return "", "", fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", epoch, err)
		}
		return commit, time.Unix(s, 0).UTC().Format(time.RFC3339), nil
	}
	d, err := git("log", "-1", "--format=%cI", "HEAD")
	if err != nil {
		return "", "", err
	}
	t, err := time.Parse(time.RFC3339, d)
	if err != nil {
		return "", "", fmt.Errorf("HEAD's committer date %q: %w", d, err)
	}
	return commit, t.UTC().Format(time.RFC3339), nil
}

// Build writes the release: the images as OCI archives with their SBOMs,
// infrastructure-components.yaml with the images pinned by digest, metadata.yaml, the cluster
// templates and ClusterClasses, both charts packaged with the version stamped, the release
// notes from CHANGELOG.md, and checksums.txt. It refuses a version whose series metadata.yaml
// lacks or whose section CHANGELOG.md lacks, before building anything.
func Build(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }
	tag, err := ChartVersion(o.Version)
	if err != nil {
		return nil, err
	}

	// Checks that need no build: the series and the release notes.
	metadata, err := os.ReadFile(filepath.Join(o.Root, MetadataFile))
	if err != nil {
		return nil, err
	}
	contract, err := ContractOf(metadata, o.Version)
	if err != nil {
		return nil, err
	}
	changelog, err := os.ReadFile(filepath.Join(o.Root, "CHANGELOG.md"))
	if err != nil {
		return nil, err
	}
	heading, section, err := ChangelogSection(changelog, o.Version)
	if err != nil {
		return nil, err
	}
	templates, err := TemplateFiles(o.Root)
	if err != nil {
		return nil, err
	}
	components, err := o.kustomize(ctx)
	if err != nil {
		return nil, err
	}
	if label := "cluster.x-k8s.io/" + contract; !bytes.Contains(components, []byte(label+": "+contract)) {
		return nil, fmt.Errorf("metadata.yaml gives %s the contract %s, but no CRD of config/default carries the label %s", o.Version, contract, label)
	}

	dir := filepath.Join(o.Out, o.Version)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	res := &Result{Dir: dir, Images: map[string]string{}}

	// The images, first: the components pin their digests.
	specs := images.Products(images.Spec{
		Registry:  o.Registry,
		Tag:       tag,
		Dir:       o.Root,
		Platforms: o.Platforms,
		Version:   o.Version,
		GitCommit: o.GitCommit,
		BuildDate: o.BuildDate,
	})
	for _, spec := range specs {
		t := time.Now()
		img, err := o.BuildImage(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", spec.Name, err)
		}
		if err := images.WriteOCIArchive(filepath.Join(dir, spec.Name+".oci.tar"), img); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, spec.Name+".spdx.json"), img.SBOM, 0o644); err != nil {
			return nil, err
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		res.Images[spec.Name] = img.Ref() + "@" + digest.String()
		logf("release: %s (%s)", res.Images[spec.Name], time.Since(t).Round(100*time.Millisecond))
	}

	// clusterctl's assets.
	pinned, err := PinImages(components, res.Images)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, ComponentsFile), pinned, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, MetadataFile), metadata, 0o644); err != nil {
		return nil, err
	}
	for _, f := range templates {
		b, err := os.ReadFile(filepath.Join(o.Root, f))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			return nil, err
		}
	}
	logf("release: %s, %s and %d templates", ComponentsFile, MetadataFile, len(templates))

	// The charts, stamped with the version and dated like the images.
	mtime, err := time.Parse(time.RFC3339, o.BuildDate)
	if err != nil {
		return nil, fmt.Errorf("build date %q is not RFC 3339: %w", o.BuildDate, err)
	}
	var edit func([]byte) ([]byte, error)
	if o.Registry != images.DefaultRegistry {
		edit = func(values []byte) ([]byte, error) { return retargetValues(values, o.Registry) }
	}
	for _, name := range ChartNames {
		p, err := PackageChart(filepath.Join(o.Root, "charts", name), dir, tag, tag, mtime, edit)
		if err != nil {
			return nil, err
		}
		logf("release: %s", filepath.Base(p))
	}

	if err := os.WriteFile(filepath.Join(dir, NotesFile), notes(o.Version, heading, section, res.Images), 0o644); err != nil {
		return nil, err
	}
	if err := writeChecksums(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		res.Files = append(res.Files, e.Name())
	}
	sort.Strings(res.Files)
	res.Duration = time.Since(start)
	logf("release: %s written in %s", dir, res.Duration.Round(time.Second))
	return res, nil
}

// withDefaults fills in the defaults of Options.
func (o Options) withDefaults() (Options, error) {
	if o.Root == "" {
		return o, errors.New("release: no repository root")
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return o, err
	}
	o.Root = root
	if o.Out == "" {
		o.Out = filepath.Join(o.Root, "out", "release")
	}
	if o.Registry == "" {
		o.Registry = images.DefaultRegistry
	}
	if o.GitCommit == "" || o.BuildDate == "" {
		commit, date, err := SourceStamps(o.Root)
		if err != nil {
			return o, err
		}
		if o.GitCommit == "" {
			o.GitCommit = commit
		}
		if o.BuildDate == "" {
			o.BuildDate = date
		}
	}
	if len(o.Platforms) == 0 {
		o.Platforms = images.DefaultPlatforms()
	}
	if o.Kubectl == "" {
		o.Kubectl = "kubectl"
	}
	if o.BuildImage == nil {
		o.BuildImage = images.Build
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o, nil
}

// kustomize builds config/default, what `make release-manifests` writes.
func (o Options) kustomize(ctx context.Context) ([]byte, error) {
	cmd := exec.CommandContext(ctx, o.Kubectl, "kustomize", filepath.Join(o.Root, "config", "default"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl kustomize config/default: %w\n%s", err, stderr.String())
	}
	return out, nil
}

// TemplateFiles returns the clusterctl templates of the repository, relative to root: every
// templates/cluster-template*.yaml (the flavors) and templates/clusterclass-*.yaml.
func TemplateFiles(root string) ([]string, error) {
	var files []string
	for _, pattern := range []string{"cluster-template*.yaml", "clusterclass-*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, "templates", pattern))
		if err != nil {
			return nil, err
		}
		for _, f := range m {
			files = append(files, filepath.Join("templates", filepath.Base(f)))
		}
	}
	if !slices.Contains(files, filepath.Join("templates", "cluster-template.yaml")) {
		return nil, errors.New("templates/cluster-template.yaml, the default flavor, is missing")
	}
	sort.Strings(files)
	return files, nil
}

// imageLine matches an image reference of a CAPOV component in a manifest, with or without
// registry, tag and digest.
var imageLine = regexp.MustCompile(`(?m)^(\s*(?:- )?image: )(?:\S+/)?(capov-[a-z]+)(?::[^\s@]+)?(?:@sha256:[0-9a-f]{64})?[ \t]*$`)

// PinImages replaces every image of componentImages in the manifests with its reference in
// refs (<registry>/<name>:<tag>@<digest>). Each of them must occur.
func PinImages(manifests []byte, refs map[string]string) ([]byte, error) {
	seen := map[string]bool{}
	var missing error
	out := imageLine.ReplaceAllFunc(manifests, func(line []byte) []byte {
		m := imageLine.FindSubmatch(line)
		name := string(m[2])
		ref, ok := refs[name]
		if !ok || !slices.Contains(componentImages, name) {
			missing = fmt.Errorf("infrastructure-components.yaml runs an image %s that the release does not build", name)
			return line
		}
		seen[name] = true
		return append(append([]byte{}, m[1]...), ref...)
	})
	if missing != nil {
		return nil, missing
	}
	for _, name := range componentImages {
		if !seen[name] {
			return nil, fmt.Errorf("infrastructure-components.yaml has no image %s to pin", name)
		}
	}
	return out, nil
}

// retargetValues points the chart's image repositories at registry.
func retargetValues(values []byte, registry string) ([]byte, error) {
	for _, name := range componentImages {
		old := []byte("repository: " + images.DefaultRegistry + "/" + name + "\n")
		if bytes.Count(values, old) != 1 {
			return nil, fmt.Errorf("values.yaml: expected one %q", strings.TrimSpace(string(old)))
		}
		values = bytes.Replace(values, old, []byte("repository: "+registry+"/"+name+"\n"), 1)
	}
	return values, nil
}

// Metadata is clusterctl's provider metadata (metadata.yaml).
type Metadata struct {
	APIVersion    string   `json:"apiVersion"`
	Kind          string   `json:"kind"`
	ReleaseSeries []Series `json:"releaseSeries"`
}

// Series is one release series of metadata.yaml (clusterctl's spelling).
type Series struct {
	Major    int32  `json:"major"`
	Minor    int32  `json:"minor"`
	Contract string `json:"contract"`
}

// ParseMetadata reads metadata.yaml strictly, as clusterctl validates it.
func ParseMetadata(b []byte) (*Metadata, error) {
	var m Metadata
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return nil, fmt.Errorf("metadata.yaml: %w", err)
	}
	if m.APIVersion != "clusterctl.cluster.x-k8s.io/v1alpha3" || m.Kind != "Metadata" {
		return nil, fmt.Errorf("metadata.yaml: apiVersion %q kind %q, want clusterctl.cluster.x-k8s.io/v1alpha3 Metadata", m.APIVersion, m.Kind)
	}
	if len(m.ReleaseSeries) == 0 {
		return nil, errors.New("metadata.yaml: no release series")
	}
	return &m, nil
}

// ContractOf returns the Cluster API contract metadata.yaml gives the version's series, or an
// error naming the series to add.
func ContractOf(metadata []byte, version string) (string, error) {
	m, err := ParseMetadata(metadata)
	if err != nil {
		return "", err
	}
	major, minor, err := SeriesOf(version)
	if err != nil {
		return "", err
	}
	for _, s := range m.ReleaseSeries {
		if s.Major == major && s.Minor == minor {
			return s.Contract, nil
		}
	}
	return "", fmt.Errorf("metadata.yaml has no release series %d.%d for %s: add {major: %d, minor: %d, contract: <contract>} (clusterctl refuses the version otherwise)", major, minor, version, major, minor)
}

// changelogHeading matches a release heading of CHANGELOG.md: "## [0.3.0] - 2026-12-07".
var changelogHeading = regexp.MustCompile(`(?m)^## \[v?([^\]]+)\](.*)$`)

// ChangelogSection returns the heading line and the body of the version's section of a Keep a
// Changelog file.
func ChangelogSection(changelog []byte, version string) (heading, body string, err error) {
	want := strings.TrimPrefix(version, "v")
	locs := changelogHeading.FindAllSubmatchIndex(changelog, -1)
	for i, loc := range locs {
		if string(changelog[loc[2]:loc[3]]) != want {
			continue
		}
		end := len(changelog)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := string(changelog[loc[1]:end])
		// Link definitions at the end of the file belong to no section.
		if j := regexp.MustCompile(`(?m)^\[[^\]]+\]: `).FindStringIndex(body); j != nil {
			body = body[:j[0]]
		}
		body = strings.TrimSpace(body)
		if body == "" {
			return "", "", fmt.Errorf("CHANGELOG.md: the section of %s is empty", want)
		}
		return strings.TrimSpace(string(changelog[loc[0]:loc[1]])), body, nil
	}
	return "", "", fmt.Errorf("CHANGELOG.md has no section \"## [%s]\": write the release's entries first", want)
}

// notes are the release notes: the version's CHANGELOG.md section, its images pinned by
// digest and how to install and verify.
func notes(version, heading, section string, refs map[string]string) []byte {
	var b strings.Builder
	date := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.SplitN(heading, "]", 2)[1]), "-"))
	fmt.Fprintf(&b, "# CAPOV %s\n\n", version)
	switch {
	case strings.EqualFold(date, "unreleased"):
		fmt.Fprintf(&b, "Not yet released: CHANGELOG.md still marks the section `%s`.\n\n", heading)
	case date != "":
		fmt.Fprintf(&b, "Released %s. The entries below are the `%s` section of CHANGELOG.md.\n\n", date, heading)
	}
	// The section's ### headings become ## ones under the notes' title.
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "### ") {
			line = line[1:]
		}
		b.WriteString(line + "\n")
	}
	b.WriteString("\n## Images\n\n")
	b.WriteString("Multi-platform images (linux/amd64, linux/arm64), each also in this release as an OCI\n")
	b.WriteString("archive (`<image>.oci.tar`) with its SPDX SBOM (`<image>.spdx.json`);\n")
	b.WriteString("`infrastructure-components.yaml` pins them by digest.\n\n")
	b.WriteString("| image | reference |\n|---|---|\n")
	names := make([]string, 0, len(refs))
	for n := range refs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | `%s` |\n", n, refs[n])
	}
	tag := strings.TrimPrefix(version, "v")
	fmt.Fprintf(&b, `
## Install and upgrade

clusterctl (a provider entry named ovirt whose url is this release's
infrastructure-components.yaml in your clusterctl configuration):

    clusterctl init --infrastructure ovirt:%[1]s
    clusterctl upgrade apply --infrastructure capov-system/ovirt:%[1]s

Helm, the CRD chart first:

    helm upgrade --install capov-crds capov-crds-%[2]s.tgz --namespace capov-system --create-namespace
    helm upgrade --install capov capov-%[2]s.tgz --namespace capov-system

The README's "Releases" section has the details and the support table.

## Verify

    sha256sum -c checksums.txt
`, version, tag)
	return []byte(b.String())
}

// writeChecksums writes checksums.txt: the SHA-256 of every other file of dir, in the format
// of sha256sum (so that `sha256sum -c checksums.txt` checks them), sorted by name.
func writeChecksums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range entries {
		if e.IsDir() || e.Name() == ChecksumsFile {
			continue
		}
		sum, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, e.Name())
	}
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), []byte(b.String()), 0o644)
}

// fileSHA256 returns the hex SHA-256 of a file.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
