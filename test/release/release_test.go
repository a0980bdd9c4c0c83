package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	"github.com/capov/capov/test/images"
	"github.com/capov/capov/test/release"
)

// imageNames are the images of a release.
var imageNames = []string{"capov-manager", "capov-ovirtsim", "capov-webhook"}

func TestReleaseHasEveryAsset(t *testing.T) {
	g := NewWithT(t)
	res := shared(t)
	tag := strings.TrimPrefix(testVersion(t), "v")
	want := []string{release.ChecksumsFile, release.ComponentsFile, release.MetadataFile, release.NotesFile,
		"capov-" + tag + ".tgz", "capov-crds-" + tag + ".tgz"}
	for _, n := range imageNames {
		want = append(want, n+".oci.tar", n+".spdx.json")
	}
	templates, err := release.TemplateFiles(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(templates).To(ContainElements("templates/cluster-template.yaml", "templates/clusterclass-ovirt.yaml"))
	for _, f := range templates {
		want = append(want, filepath.Base(f))
		// Every template and ClusterClass as the repository has it.
		repo, err := os.ReadFile(filepath.Join(root, f))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.ReadFile(filepath.Join(res.Dir, filepath.Base(f)))).To(Equal(repo), f)
	}
	sort.Strings(want)
	g.Expect(res.Files).To(Equal(want))
	g.Expect(filepath.Base(res.Dir)).To(Equal(testVersion(t)))
}

func TestChecksumsCoverEveryFileInSha256sumFormat(t *testing.T) {
	g := NewWithT(t)
	res := shared(t)
	b, err := os.ReadFile(filepath.Join(res.Dir, release.ChecksumsFile))
	g.Expect(err).NotTo(HaveOccurred())
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	var named []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		g.Expect(m).NotTo(BeNil(), "not a sha256sum line: %q", sc.Text())
		sum, err := sha256File(filepath.Join(res.Dir, m[2]))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sum).To(Equal(m[1]), m[2])
		named = append(named, m[2])
	}
	g.Expect(sort.StringsAreSorted(named)).To(BeTrue())
	var others []string
	for _, f := range res.Files {
		if f != release.ChecksumsFile {
			others = append(others, f)
		}
	}
	g.Expect(named).To(Equal(others))
}

// TestReleaseIsReproducible builds the release a second time, into another directory, and
// compares every checksum. The images of the second build are the first build's (memoized in
// this process: building them twice would double the test's cost); test/images'
// TestImagesAreReproducible builds them twice, and make release-verify builds whole releases
// twice.
func TestReleaseIsReproducible(t *testing.T) {
	g := NewWithT(t)
	a := shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b, err := release.Build(ctx, options(t, filepath.Join(scratch, "b")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Files).To(Equal(a.Files))
	for _, f := range a.Files {
		g.Expect(sha256File(filepath.Join(b.Dir, f))).To(Equal(must(sha256File(filepath.Join(a.Dir, f)))), f)
	}
}

func TestComponentsPinTheImagesOfTheArchives(t *testing.T) {
	g := NewWithT(t)
	res := shared(t)
	tag := strings.TrimPrefix(testVersion(t), "v")
	components, err := os.ReadFile(filepath.Join(res.Dir, release.ComponentsFile))
	g.Expect(err).NotTo(HaveOccurred())

	// Every image the components run is <registry>/<name>:<tag>@<digest> of an archive.
	refs := regexp.MustCompile(`(?m)^\s*(?:- )?image: (\S+)$`).FindAllSubmatch(components, -1)
	g.Expect(refs).To(HaveLen(2), "the manager and the webhook")
	seen := map[string]bool{}
	for _, m := range refs {
		ref := string(m[1])
		parts := regexp.MustCompile(`^` + regexp.QuoteMeta(images.DefaultRegistry) + `/(capov-[a-z]+):` + regexp.QuoteMeta(tag) + `@(sha256:[0-9a-f]{64})$`).FindStringSubmatch(ref)
		g.Expect(parts).NotTo(BeNil(), "%s is not <registry>/<image>:%s@<digest>", ref, tag)
		name, digest := parts[1], parts[2]
		seen[name] = true
		index := archiveIndex(t, filepath.Join(res.Dir, name+".oci.tar"))
		g.Expect(index.Manifests).To(HaveLen(1))
		g.Expect(index.Manifests[0].Digest.String()).To(Equal(digest), "%s: the archive's image is the pinned digest", name)
		g.Expect(index.Manifests[0].Annotations).To(HaveKeyWithValue(images.AnnotationRefName, images.DefaultRegistry+"/"+name+":"+tag))
		g.Expect(res.Images).To(HaveKeyWithValue(name, ref))
	}
	g.Expect(seen).To(HaveKey("capov-manager"))
	g.Expect(seen).To(HaveKey("capov-webhook"))

	// The simulator's archive names the same tag; every image has its SBOM.
	index := archiveIndex(t, filepath.Join(res.Dir, "capov-ovirtsim.oci.tar"))
	g.Expect(index.Manifests[0].Annotations).To(HaveKeyWithValue(images.AnnotationRefName, images.DefaultRegistry+"/capov-ovirtsim:"+tag))
	for _, n := range imageNames {
		var sbom struct {
			SPDXVersion string `json:"spdxVersion"`
		}
		b, err := os.ReadFile(filepath.Join(res.Dir, n+".spdx.json"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(json.Unmarshal(b, &sbom)).To(Succeed())
		g.Expect(sbom.SPDXVersion).To(Equal("SPDX-2.3"), n)
	}
}

func TestChartsCarryTheReleaseVersionAndTheComponentsImages(t *testing.T) {
	g := NewWithT(t)
	res := shared(t)
	tag := strings.TrimPrefix(testVersion(t), "v")
	for _, name := range release.ChartNames {
		c, err := loader.Load(filepath.Join(res.Dir, name+"-"+tag+".tgz"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Metadata.Version).To(Equal(tag), name)
		g.Expect(c.Metadata.AppVersion).To(Equal(tag), name)
	}

	// The capov chart's default images are the components' images without their digest.
	helm := tool(t, "HELM", "helm.sh")
	out := run(t, nil, helm, "template", "capov", filepath.Join(res.Dir, "capov-"+tag+".tgz"),
		"--namespace", "capov-system", "--set", "preflight.enabled=false")
	rendered := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:- )?image: "?([^"\s]+)"?$`).FindAllStringSubmatch(out, -1) {
		rendered[m[1]] = true
	}
	want := map[string]bool{}
	for _, n := range []string{"capov-manager", "capov-webhook"} {
		want[strings.SplitN(res.Images[n], "@", 2)[0]] = true
	}
	g.Expect(rendered).To(Equal(want))

	// The CRD chart renders the CRDs of the components, with the contract label of the series.
	crds := run(t, nil, helm, "template", "capov-crds", filepath.Join(res.Dir, "capov-crds-"+tag+".tgz"), "--namespace", "capov-system")
	components, err := os.ReadFile(filepath.Join(res.Dir, release.ComponentsFile))
	g.Expect(err).NotTo(HaveOccurred())
	metadata, err := os.ReadFile(filepath.Join(res.Dir, release.MetadataFile))
	g.Expect(err).NotTo(HaveOccurred())
	contract, err := release.ContractOf(metadata, testVersion(t))
	g.Expect(err).NotTo(HaveOccurred())
	fromChart, fromComponents := crdLabels(t, []byte(crds)), crdLabels(t, components)
	g.Expect(fromChart).NotTo(BeEmpty())
	g.Expect(keys(fromChart)).To(Equal(keys(fromComponents)), "the same CRDs in the chart and the components")
	// The kinds Cluster API references carry the contract label of the series; so does every
	// other CRD that carries a contract label at all (OVirtProvider carries none).
	for _, kind := range []string{"ovirtclusters", "ovirtmachines", "ovirtmachinetemplates", "ovirtclustertemplates"} {
		g.Expect(fromComponents).To(HaveKey(kind + ".infrastructure.cluster.x-k8s.io"))
	}
	for name, labels := range fromComponents {
		contractLabels := 0
		for k := range labels {
			if strings.HasPrefix(k, "cluster.x-k8s.io/v1") {
				contractLabels++
			}
		}
		if contractLabels == 0 && !strings.HasPrefix(name, "ovirtcluster") && !strings.HasPrefix(name, "ovirtmachine") {
			continue
		}
		g.Expect(labels).To(HaveKeyWithValue("cluster.x-k8s.io/"+contract, contract), "%s has the contract label of metadata.yaml's series", name)
		g.Expect(fromChart[name]).To(HaveKeyWithValue("cluster.x-k8s.io/"+contract, contract), name)
	}
}

// TestPackagedChartsAreWhatHelmPackageMakes packages both charts with `helm package` and
// compares: the same entries in the same order with the same headers and contents (only the
// modification time differs: Helm's is the clock), and the same `helm show chart`, `helm
// show values` and `helm template` output.
func TestPackagedChartsAreWhatHelmPackageMakes(t *testing.T) {
	res := shared(t)
	tag := strings.TrimPrefix(testVersion(t), "v")
	helm := tool(t, "HELM", "helm.sh")
	dir := t.TempDir()
	for _, name := range release.ChartNames {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			run(t, nil, helm, "package", filepath.Join(root, "charts", name), "--version", tag, "--app-version", tag, "--destination", dir)
			theirs, ours := filepath.Join(dir, name+"-"+tag+".tgz"), filepath.Join(res.Dir, name+"-"+tag+".tgz")
			te, oe := tarEntries(t, theirs), tarEntries(t, ours)
			g.Expect(oe).To(HaveLen(len(te)))
			g.Expect(oe[0].header.Name).To(Equal(name+"/Chart.yaml"), "Chart.yaml first")
			for i := range te {
				g.Expect(oe[i].header.Name).To(Equal(te[i].header.Name))
				g.Expect(oe[i].header.Mode).To(Equal(te[i].header.Mode), te[i].header.Name)
				g.Expect(oe[i].header.Uid).To(Equal(te[i].header.Uid), te[i].header.Name)
				g.Expect(oe[i].header.Gid).To(Equal(te[i].header.Gid), te[i].header.Name)
				g.Expect(oe[i].header.Typeflag).To(Equal(te[i].header.Typeflag), te[i].header.Name)
				g.Expect(oe[i].header.Format).To(Equal(te[i].header.Format), te[i].header.Name)
				g.Expect(oe[i].body).To(Equal(te[i].body), te[i].header.Name)
			}
			g.Expect(gzipHeader(t, ours)).To(Equal(gzipHeader(t, theirs)))
			for _, args := range [][]string{
				{"show", "chart"}, {"show", "values"}, {"show", "readme"},
				{"template", name, "--namespace", "capov-system", "--set", "preflight.enabled=false"},
			} {
				if name == "capov-crds" && args[0] == "template" {
					args = args[:len(args)-2]
				}
				g.Expect(run(t, nil, helm, append(args, ours)...)).To(Equal(run(t, nil, helm, append(args, theirs)...)), strings.Join(args, " "))
			}
		})
	}
}

// TestClusterctlReadsTheRelease lays the release out as a clusterctl repository and has
// clusterctl generate the provider's components from it, as `clusterctl init` does: it
// validates metadata.yaml, finds the version's series and parses the images.
func TestClusterctlReadsTheRelease(t *testing.T) {
	g := NewWithT(t)
	res := shared(t)
	version := testVersion(t)
	repo := filepath.Join(t.TempDir(), "infrastructure-ovirt", version)
	g.Expect(os.MkdirAll(repo, 0o755)).To(Succeed())
	for _, f := range res.Files {
		if strings.HasSuffix(f, ".yaml") {
			b, err := os.ReadFile(filepath.Join(res.Dir, f))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(os.WriteFile(filepath.Join(repo, f), b, 0o644)).To(Succeed())
		}
	}
	config := filepath.Join(t.TempDir(), "clusterctl.yaml")
	g.Expect(os.WriteFile(config, []byte("providers:\n  - name: ovirt\n    url: "+filepath.Join(repo, release.ComponentsFile)+"\n    type: InfrastructureProvider\n"), 0o644)).To(Succeed())
	clusterctl := tool(t, "CLUSTERCTL", "clusterctl.sh")
	env := []string{"CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME=" + t.TempDir(), "GITHUB_TOKEN="}
	out := run(t, env, clusterctl, "generate", "provider", "--infrastructure", "ovirt:"+version, "--config", config, "--describe")
	g.Expect(out).To(ContainSubstring(version))
	for _, n := range []string{"capov-manager", "capov-webhook"} {
		g.Expect(out).To(ContainSubstring(res.Images[n]))
	}
	g.Expect(run(t, env, clusterctl, "generate", "provider", "--infrastructure", "ovirt:"+version, "--config", config,
		"--target-namespace", "capov-system")).To(ContainSubstring(res.Images["capov-manager"]))
}

func TestReleaseNotesAreTheChangelogSection(t *testing.T) {
	g := NewWithT(t)
	res := shared(t)
	version := testVersion(t)
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	g.Expect(err).NotTo(HaveOccurred())
	_, section, err := release.ChangelogSection(changelog, version)
	g.Expect(err).NotTo(HaveOccurred())
	b, err := os.ReadFile(filepath.Join(res.Dir, release.NotesFile))
	g.Expect(err).NotTo(HaveOccurred())
	notes := string(b)
	g.Expect(notes).To(HavePrefix("# CAPOV " + version + "\n"))
	for _, h := range []string{"Added", "Changed", "Fixed", "Upgrade notes"} {
		g.Expect(section).To(ContainSubstring("### "+h+"\n"), "the changelog section of %s has %q", version, h)
		g.Expect(notes).To(ContainSubstring("\n## " + h + "\n"))
	}
	for _, line := range strings.Split(section, "\n") {
		g.Expect(notes).To(ContainSubstring(strings.TrimPrefix(line, "#")))
	}
	for _, ref := range res.Images {
		g.Expect(notes).To(ContainSubstring(ref))
	}
}

func TestBuildRefusesAVersionItCannotRelease(t *testing.T) {
	for _, tc := range []struct {
		name, version, want string
	}{
		{"a version without the v", "0.3.0", "not a semantic version"},
		{"a version with build metadata", "v0.3.0+abc", "not a semantic version"},
		{"a version whose series metadata.yaml lacks", "v9.9.0", "metadata.yaml has no release series 9.9"},
		{"a version CHANGELOG.md has no section for", "v0.3.99", `CHANGELOG.md has no section "## [0.3.99]"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			o := options(t, t.TempDir())
			o.Version = tc.version
			o.BuildImage = func(context.Context, images.Spec) (*images.Image, error) {
				return nil, errors.New("no image should be built")
			}
			_, err := release.Build(context.Background(), o)
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

func TestPinImagesReplacesEveryComponentImage(t *testing.T) {
	refs := map[string]string{
		"capov-manager": "r.example/capov-manager:1.2.3@sha256:" + strings.Repeat("a", 64),
		"capov-webhook": "r.example/capov-webhook:1.2.3@sha256:" + strings.Repeat("b", 64),
	}
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"tags", "        image: ghcr.io/capov/capov-manager:0.2.0\n      - image: ghcr.io/capov/capov-webhook:0.2.0\n",
			"        image: " + refs["capov-manager"] + "\n      - image: " + refs["capov-webhook"] + "\n", ""},
		{"no registry, a digest already", "image: capov-manager@sha256:" + strings.Repeat("c", 64) + "\nimage: capov-webhook\n",
			"image: " + refs["capov-manager"] + "\nimage: " + refs["capov-webhook"] + "\n", ""},
		{"a missing webhook", "image: ghcr.io/capov/capov-manager:0.2.0\n", "", "no image capov-webhook"},
		{"an image the release does not build", "image: ghcr.io/capov/capov-manager:0.2.0\nimage: ghcr.io/capov/capov-other:1\n", "", "does not build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := release.PinImages([]byte(tc.in), refs)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(Equal(tc.want))
		})
	}
}

func TestChangelogSectionEndsAtTheNextRelease(t *testing.T) {
	g := NewWithT(t)
	changelog := []byte("# Changelog\n\n## [0.2.0] - 2026-12-06\n\n### Added\n\n- b\n\n## [0.1.0] - 2026-12-01\n\n### Added\n\n- a\n\n[0.2.0]: https://x/0.2.0\n[0.1.0]: https://x/0.1.0\n")
	heading, body, err := release.ChangelogSection(changelog, "v0.2.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(heading).To(Equal("## [0.2.0] - 2026-12-06"))
	g.Expect(body).To(Equal("### Added\n\n- b"))
	_, body, err = release.ChangelogSection(changelog, "v0.1.0")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(body).To(Equal("### Added\n\n- a"), "link definitions belong to no section")
}

// entry is one tar entry.
type entry struct {
	header *tar.Header
	body   []byte
}

// tarEntries reads the entries of a gzipped tar archive.
func tarEntries(t *testing.T, path string) []entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{h, b})
	}
}

// gzipHeader returns the gzip header fields of an archive that do not depend on the clock.
func gzipHeader(t *testing.T, path string) [3]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return [3]string{string(zr.Extra), zr.Comment, zr.Name}
}

// archiveIndex returns index.json of an OCI archive.
func archiveIndex(t *testing.T, path string) *v1.IndexManifest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no index.json: %v", path, err)
		}
		if h.Name == "index.json" {
			idx, err := v1.ParseIndexManifest(tr)
			if err != nil {
				t.Fatal(err)
			}
			return idx
		}
	}
}

// crdLabels returns the labels of every CustomResourceDefinition of a multi-document YAML
// stream, by name.
func crdLabels(t *testing.T, stream []byte) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(stream), -1) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("parsing a document: %v", err)
		}
		if obj.Kind == "CustomResourceDefinition" {
			out[obj.Metadata.Name] = obj.Metadata.Labels
		}
	}
	return out
}

// keys returns the sorted keys of a map.
func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sha256File returns the hex SHA-256 of a file.
func sha256File(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// must returns v, panicking on err (for values a test computed already).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
