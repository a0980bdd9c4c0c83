package images_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/capov/capov/test/images"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

// Version stamps of the test images.
const (
	testVersion   = "v9.8.7-test"
	testCommit    = "0123456789abcdef0123456789abcdef01234567"
	testBuildDate = "2026-12-01T09:00:00Z"
	testTag       = "9.8.7-test"
)

// built holds what TestMain builds once for the whole run: the binaries of the Dockerfiles'
// images for linux/amd64 and the small multiarch program for every default platform, and the
// images assembled from them.
type built struct {
	dir      string
	specs    map[string]images.Spec       // manager, webhook (the Dockerfiles' suffixes), multiarch
	binaries map[string]map[string]string // name -> platform -> path
	images   map[string]*images.Image     // name -> image
}

// productPlatforms are the platforms the tests build the product images for. `make images`
// builds every default platform; compiling the manager's and the webhook's dependencies for
// arm64 as well would double the cost of a cold run (docs/development.md), and what differs
// per platform (the index, the ELF machine, the SBOM's binaries) is tested with the multiarch
// program on every default platform.
var productPlatforms = []string{"linux/amd64"}

// fixture is set by TestMain; nil with -short (the tests that need it skip).
var fixture *built

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if !testing.Short() {
			b, err := build(context.Background())
			if b != nil {
				defer os.RemoveAll(b.dir)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "building the test images:", err)
				return 1
			}
			fixture = b
		}
		return m.Run()
	}()
	os.Exit(code)
}

// build compiles manager and webhook for linux/amd64 and the multiarch program for every
// default platform (the slow part, once) and assembles their images.
func build(ctx context.Context) (*built, error) {
	dir, err := os.MkdirTemp("", "capov-images-test-")
	if err != nil {
		return nil, err
	}
	b := &built{dir: dir, specs: map[string]images.Spec{}, binaries: map[string]map[string]string{}, images: map[string]*images.Image{}}
	abs, err := filepath.Abs(root)
	if err != nil {
		return b, err
	}
	specs := map[string]images.Spec{}
	for _, spec := range images.Products(testSpec(abs)) {
		if suffix := strings.TrimPrefix(spec.Name, "capov-"); suffix == "manager" || suffix == "webhook" {
			spec.Platforms = productPlatforms
			specs[suffix] = spec
		}
	}
	multi := testSpec(abs)
	multi.Name, multi.Package, multi.Binary = "capov-multiarch", "./test/images/internal/multiarch", "/multiarch"
	multi.Platforms = images.DefaultPlatforms()
	specs["multiarch"] = multi
	for name, spec := range specs {
		b.specs[name] = spec
		b.binaries[name] = map[string]string{}
		for _, p := range spec.Platforms {
			bin, err := images.Compile(ctx, spec, p, dir)
			if err != nil {
				return b, err
			}
			b.binaries[name][p] = bin
		}
		img, err := images.Assemble(ctx, spec, b.binaries[name])
		if err != nil {
			return b, err
		}
		b.images[name] = img
	}
	return b, nil
}

// indexPlatform is the platform string of an index entry for a Spec platform: arm64 gets its
// variant.
func indexPlatform(p string) string {
	if p == "linux/arm64" {
		return "linux/arm64/v8"
	}
	return p
}

func testSpec(dir string) images.Spec {
	return images.Spec{Tag: testTag, Dir: dir, Version: testVersion, GitCommit: testCommit, BuildDate: testBuildDate}
}

func needFixture(t *testing.T) *built {
	t.Helper()
	if fixture == nil {
		t.Skip("builds the manager and the webhook; not with -short")
	}
	return fixture
}

// dockerfile is what the test reads of a Dockerfile.
type dockerfile struct {
	runtimeFrom string   // FROM of the last stage
	copyFrom    string   // COPY --from=build <src> of the last stage
	copyDest    string   // and its destination
	user        string   // USER of the last stage
	entrypoint  []string // ENTRYPOINT (exec form)
	workdir     string   // WORKDIR of the last stage, "" if none
	env         []string // ENV of the last stage
	goBuild     string   // the build stage's `go build ...` command
}

// parseDockerfile reads the instructions that decide the runtime image (continuation lines
// joined, comments skipped).
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\"))
			continue
		}
		cur.WriteString(l)
		lines = append(lines, strings.TrimSpace(cur.String()))
		cur.Reset()
	}
	var df dockerfile
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			df.runtimeFrom, df.copyFrom, df.copyDest, df.user, df.workdir, df.env = rest, "", "", "", "", nil
		case "COPY":
			f := strings.Fields(rest)
			if len(f) == 3 && strings.HasPrefix(f[0], "--from=") {
				df.copyFrom, df.copyDest = f[1], f[2]
			}
		case "USER":
			df.user = rest
		case "WORKDIR":
			df.workdir = rest
		case "ENV":
			df.env = append(df.env, rest)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &df.entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT %s is not in exec form: %v", path, rest, err)
			}
		case "RUN":
			if i := strings.Index(rest, "go build "); i >= 0 {
				df.goBuild = rest[i:]
			}
		}
	}
	return df
}

// fileInfo is one file of an image's flattened file system.
type fileInfo struct {
	header *tar.Header
	data   []byte
}

// flatten reads the image's file system as a container runtime would see it.
func flatten(t *testing.T, img v1.Image) map[string]fileInfo {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]fileInfo{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimSuffix(h.Name, "/")] = fileInfo{header: h, data: data}
	}
}

// platformImages returns the runnable images of the index by platform ("linux/arm64/v8"),
// leaving out the SBOM artifacts (platform unknown/unknown).
func platformImages(t *testing.T, idx v1.ImageIndex) map[string]v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Image{}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("index entry %s has no platform", d.Digest)
		}
		if d.Platform.OS == "unknown" {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Platform.String()] = img
	}
	return out
}

// TestImagesAgreeWithTheDockerfiles reads Dockerfile.manager and Dockerfile.webhook and checks
// that the assembled images are what `docker build` would make of them, on the platforms the
// tests build them for (productPlatforms; TestMultiPlatformImages covers the others):
// the distroless static nonroot base (users, groups, home, /tmp, CA bundle, environment,
// working directory), the binary at the COPY destination built with the Dockerfile's go build
// command for the right architecture, USER and ENTRYPOINT.
func TestImagesAgreeWithTheDockerfiles(t *testing.T) {
	fx := needFixture(t)
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	ldflags := regexp.MustCompile(`(?m)^LDFLAGS := (.*)$`).FindSubmatch(makefile)
	if ldflags == nil {
		t.Fatal("Makefile has no LDFLAGS line")
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, name := range []string{"manager", "webhook"} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			df := parseDockerfile(t, filepath.Join(root, "Dockerfile."+name))
			img := fx.images[name]
			spec := img.Spec // with the defaults, e.g. the entrypoint

			// The Dockerfile's runtime stage, and the spec that mirrors it.
			g.Expect(df.runtimeFrom).To(Equal("gcr.io/distroless/static-debian12:nonroot"),
				"the base layout of test/images is distroless static nonroot's; a new base needs a new layout")
			g.Expect(df.workdir).To(BeEmpty(), "no WORKDIR: the image keeps distroless's")
			g.Expect(df.env).To(BeEmpty(), "no ENV: the image keeps distroless's")
			g.Expect(df.copyDest).To(Equal(spec.Binary))
			g.Expect(df.entrypoint).To(Equal(spec.Entrypoint))
			g.Expect(df.goBuild).To(Equal(`go build -trimpath -ldflags "`+string(ldflags[1])+`" -o `+df.copyFrom+" "+spec.Package),
				"the Dockerfile builds the package the spec names with the Makefile's LDFLAGS")
			g.Expect(images.LDFlags("${VERSION}", "${GIT_COMMIT}", "${BUILD_DATE}")).To(Equal(string(ldflags[1])))

			byPlatform := platformImages(t, img.Index)
			g.Expect(byPlatform).To(HaveLen(len(fx.specs[name].Platforms)))
			for _, p := range fx.specs[name].Platforms {
				platform, arch := indexPlatform(p), strings.Split(p, "/")[1]
				pimg, ok := byPlatform[platform]
				g.Expect(ok).To(BeTrue(), "the index has %s", platform)
				cf, err := pimg.ConfigFile()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cf.OS).To(Equal("linux"))
				g.Expect(cf.Architecture).To(Equal(arch))
				g.Expect(cf.Config.User).To(Equal(df.user))
				g.Expect(cf.Config.Entrypoint).To(Equal(df.entrypoint))
				g.Expect(cf.Config.Cmd).To(BeEmpty())
				g.Expect(cf.Config.WorkingDir).To(Equal("/home/nonroot"))
				g.Expect(cf.Config.Env).To(ConsistOf(
					"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
					"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"))
				g.Expect(cf.Created.Time).To(BeTemporally("==", time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)))
				g.Expect(cf.Config.Labels).To(Equal(map[string]string{
					"org.opencontainers.image.title":    "capov-" + name,
					"org.opencontainers.image.source":   "https://github.com/capov/capov",
					"org.opencontainers.image.version":  testVersion,
					"org.opencontainers.image.revision": testCommit,
					"org.opencontainers.image.created":  testBuildDate,
					"org.opencontainers.image.licenses": "NOASSERTION",
				}))

				files := flatten(t, pimg)
				checkDistrolessLayout(t, files, df.user, cf.Config.WorkingDir)

				bin, ok := files[df.copyDest]
				g.Expect(ok).To(BeTrue(), "the binary is at the COPY destination %s", df.copyDest)
				g.Expect(bin.header.Typeflag).To(Equal(byte(tar.TypeReg)))
				g.Expect(bin.header.Mode).To(Equal(int64(0o755)))
				g.Expect(bin.header.Uid).To(Equal(0), "COPY without --chown: owned by root")
				ef, err := elf.NewFile(bytes.NewReader(bin.data))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(ef.Machine).To(Equal(machines[arch]))
				for _, prog := range ef.Progs {
					g.Expect(prog.Type).NotTo(Equal(elf.PT_INTERP), "static: no dynamic loader")
				}
				info, err := buildinfo.Read(bytes.NewReader(bin.data))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(info.Main.Path).To(Equal("github.com/capov/capov"))
				g.Expect(info.Path).To(Equal("github.com/capov/capov/cmd/" + name))
				// go build records no -ldflags with -trimpath: check what they do instead.
				g.Expect(info.Settings).To(ContainElements(
					debugSetting("-trimpath", "true"),
					debugSetting("CGO_ENABLED", "0"),
					debugSetting("GOOS", "linux"),
					debugSetting("GOARCH", arch)))
				for _, stamp := range []string{testVersion, testCommit, testBuildDate} {
					g.Expect(bytes.Contains(bin.data, []byte(stamp))).To(BeTrue(), "-X stamps %s", stamp)
				}
				g.Expect(ef.Section(".symtab")).To(BeNil(), "-s: no symbol table")
				g.Expect(ef.Section(".debug_info")).To(BeNil(), "-w: no DWARF")
			}
		})
	}
}

// checkDistrolessLayout checks the files distroless static nonroot gives a static binary,
// and that the config's user and working directory exist in them.
func checkDistrolessLayout(t *testing.T, files map[string]fileInfo, user, workdir string) {
	t.Helper()
	g := NewWithT(t)
	passwd := string(files["/etc/passwd"].data)
	g.Expect(strings.Split(strings.TrimSpace(passwd), "\n")).To(Equal([]string{
		"root:x:0:0:root:/root:/sbin/nologin",
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin",
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin",
	}))
	g.Expect(strings.Split(strings.TrimSpace(string(files["/etc/group"].data)), "\n")).To(ContainElements(
		"root:x:0:", "nobody:x:65534:", "nonroot:x:65532:"))

	// USER uid:gid is a passwd entry whose home is the working directory, and the group exists.
	uid, gid, ok := strings.Cut(user, ":")
	g.Expect(ok).To(BeTrue(), "USER is uid:gid")
	g.Expect(passwd).To(MatchRegexp(`(?m)^[a-z]+:x:` + uid + `:` + gid + `:[^:]*:` + regexp.QuoteMeta(workdir) + `:/sbin/nologin$`))
	g.Expect(string(files["/etc/group"].data)).To(MatchRegexp(`(?m)^[a-z]+:x:` + gid + `:`))

	dir := func(name string, mode int64, uid int) {
		f, ok := files[name]
		g.Expect(ok).To(BeTrue(), "%s exists", name)
		g.Expect(f.header.Typeflag).To(Equal(byte(tar.TypeDir)), name)
		g.Expect(f.header.Mode).To(Equal(mode), "%s mode", name)
		g.Expect(f.header.Uid).To(Equal(uid), "%s owner", name)
		g.Expect(f.header.Gid).To(Equal(uid), "%s group", name)
	}
	dir("/home/nonroot", 0o700, 65532)
	dir("/tmp", 0o1777, 0)
	dir("/root", 0o700, 0)
	g.Expect(string(files["/etc/nsswitch.conf"].data)).To(MatchRegexp(`(?m)^hosts:\s+files dns$`))

	ca := files["/etc/ssl/certs/ca-certificates.crt"].data
	n := 0
	for rest := ca; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			g.Expect(bytes.TrimSpace(rest)).To(BeEmpty(), "nothing but certificates")
			break
		}
		g.Expect(block.Type).To(Equal("CERTIFICATE"))
		cert, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cert.IsCA).To(BeTrue(), cert.Subject.String())
		n++
	}
	g.Expect(n).To(BeNumerically(">", 100), "the Mozilla roots")
	g.Expect(x509.NewCertPool().AppendCertsFromPEM(ca)).To(BeTrue())
}

// TestMultiPlatformImages checks what differs per platform on the multiarch program, built
// for every default platform as `make images` builds the product images: one runnable image
// per platform in the index, each with its architecture in the config and a static binary for
// that machine, built with the images' go build settings; and that the product specs take the
// default platforms (amd64 and arm64).
func TestMultiPlatformImages(t *testing.T) {
	fx := needFixture(t)
	g := NewWithT(t)
	g.Expect(images.DefaultPlatforms()).To(Equal([]string{"linux/amd64", "linux/arm64"}))
	for _, s := range images.Products(images.Spec{Tag: testTag}) {
		g.Expect(s.Platforms).To(BeEmpty(), "%s: make images builds the default platforms", s.Name)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	byPlatform := platformImages(t, fx.images["multiarch"].Index)
	g.Expect(byPlatform).To(HaveLen(len(images.DefaultPlatforms())))
	for _, p := range images.DefaultPlatforms() {
		arch := strings.Split(p, "/")[1]
		pimg, ok := byPlatform[indexPlatform(p)]
		g.Expect(ok).To(BeTrue(), "the index has %s", indexPlatform(p))
		cf, err := pimg.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cf.OS).To(Equal("linux"))
		g.Expect(cf.Architecture).To(Equal(arch))
		if arch == "arm64" {
			g.Expect(cf.Variant).To(Equal("v8"))
		}
		bin, ok := flatten(t, pimg)["/multiarch"]
		g.Expect(ok).To(BeTrue())
		ef, err := elf.NewFile(bytes.NewReader(bin.data))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ef.Machine).To(Equal(machines[arch]), p)
		for _, prog := range ef.Progs {
			g.Expect(prog.Type).NotTo(Equal(elf.PT_INTERP), "static: no dynamic loader")
		}
		info, err := buildinfo.Read(bytes.NewReader(bin.data))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(info.Settings).To(ContainElements(
			debugSetting("-trimpath", "true"), debugSetting("CGO_ENABLED", "0"),
			debugSetting("GOOS", "linux"), debugSetting("GOARCH", arch)))
		g.Expect(bytes.Contains(bin.data, []byte(testVersion))).To(BeTrue(), "-X stamps the version")
	}
}

func debugSetting(k, v string) any {
	return And(HaveField("Key", k), HaveField("Value", v))
}

// TestImagesAreReproducible assembles the manager again from the same inputs and expects the
// same digests and archive bytes; a changed build date must change them (so the comparison
// can fail). It also rebuilds one binary: go build itself must give the same bytes.
func TestImagesAreReproducible(t *testing.T) {
	fx := needFixture(t)
	g := NewWithT(t)
	ctx := context.Background()
	first := fx.images["manager"]
	again, err := images.Assemble(ctx, fx.specs["manager"], fx.binaries["manager"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(digest(t, again)).To(Equal(digest(t, first)))
	g.Expect(again.SBOM).To(Equal(first.SBOM))

	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.oci.tar"), filepath.Join(dir, "b.oci.tar")
	g.Expect(images.WriteOCIArchive(a, first)).To(Succeed())
	g.Expect(images.WriteOCIArchive(b, again)).To(Succeed())
	g.Expect(fileSHA256(t, a)).To(Equal(fileSHA256(t, b)), "the same archive bytes")

	later := fx.specs["manager"]
	later.BuildDate = "2026-12-02T09:00:00Z"
	changed, err := images.Assemble(ctx, later, fx.binaries["manager"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(digest(t, changed)).NotTo(Equal(digest(t, first)), "the creation date is an input")

	rebuilt, err := images.Compile(ctx, fx.specs["manager"], "linux/amd64", dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fileSHA256(t, rebuilt)).To(Equal(fileSHA256(t, fx.binaries["manager"]["linux/amd64"])))

	// Every layer is a normalised tar: sorted names, epoch mtimes, numeric owners only. The
	// base layer is one blob shared by every image and platform.
	bases := map[v1.Hash]bool{}
	for _, img := range []*images.Image{fx.images["manager"], fx.images["webhook"], fx.images["multiarch"]} {
		for _, pimg := range platformImages(t, img.Index) {
			layers, err := pimg.Layers()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(layers).To(HaveLen(2))
			base, err := layers[0].Digest()
			g.Expect(err).NotTo(HaveOccurred())
			bases[base] = true
			for _, l := range layers {
				rc, err := l.Uncompressed()
				g.Expect(err).NotTo(HaveOccurred())
				tr := tar.NewReader(rc)
				prev := ""
				for {
					h, err := tr.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(h.Name > prev).To(BeTrue(), "%s sorted after %s", h.Name, prev)
					prev = h.Name
					g.Expect(h.ModTime.Unix()).To(BeZero(), h.Name)
					g.Expect(h.Uname+h.Gname).To(BeEmpty(), h.Name)
					g.Expect(h.AccessTime.IsZero() && h.ChangeTime.IsZero()).To(BeTrue(), h.Name)
				}
				rc.Close()
			}
		}
	}
	g.Expect(bases).To(HaveLen(1))
}

// TestArchiveNamesTheImageAndAttachesTheSBOM writes a two-platform archive, unpacks it and
// reads it back as an OCI image layout: one entry, the image index named with the full
// reference; every platform image valid; one SBOM artifact per platform image, inside the
// index, whose subject is that image.
func TestArchiveNamesTheImageAndAttachesTheSBOM(t *testing.T) {
	fx := needFixture(t)
	g := NewWithT(t)
	img := fx.images["multiarch"]
	dir := t.TempDir()
	archive := filepath.Join(dir, "capov-multiarch.oci.tar")
	g.Expect(images.WriteOCIArchive(archive, img)).To(Succeed())
	st, err := os.Stat(archive)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode().Perm()).To(Equal(os.FileMode(0o644)))
	layoutDir := filepath.Join(dir, "layout")
	untar(t, archive, layoutDir)
	blob := func(h v1.Hash) []byte {
		b, err := os.ReadFile(filepath.Join(layoutDir, "blobs", h.Algorithm, h.Hex))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fmt.Sprintf("%x", sha256.Sum256(b))).To(Equal(h.Hex), "blob matches its digest")
		return b
	}

	lp, err := layout.FromPath(layoutDir)
	g.Expect(err).NotTo(HaveOccurred())
	top, err := lp.ImageIndex()
	g.Expect(err).NotTo(HaveOccurred())
	im, err := top.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(im.Manifests).To(HaveLen(1), "one image: what crane push and ctr import --digests expect")

	ref := "ghcr.io/capov/capov-multiarch:" + testTag
	named := im.Manifests[0]
	g.Expect(named.MediaType).To(BeEquivalentTo("application/vnd.oci.image.index.v1+json"))
	g.Expect(named.Digest).To(Equal(digest(t, img)))
	g.Expect(named.Annotations).To(Equal(map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	}))
	idx, err := top.ImageIndex(named.Digest)
	g.Expect(err).NotTo(HaveOccurred())
	idxManifest, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(idxManifest.Annotations).To(HaveKeyWithValue("org.opencontainers.image.revision", testCommit))
	g.Expect(idxManifest.Manifests).To(HaveLen(4), "two platform images, two SBOM artifacts")

	runnable := map[v1.Hash]v1.Descriptor{}
	var sboms []v1.Descriptor
	for _, d := range idxManifest.Manifests {
		g.Expect(d.MediaType).To(BeEquivalentTo("application/vnd.oci.image.manifest.v1+json"))
		if d.Platform.OS == "unknown" {
			sboms = append(sboms, d)
			continue
		}
		g.Expect(d.ArtifactType).To(BeEmpty(), "a runnable image")
		pimg, err := idx.Image(d.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(validate.Image(pimg)).To(Succeed(), "manifest, config and layers match their digests")
		runnable[d.Digest] = d
	}
	g.Expect(runnable).To(HaveLen(2))
	g.Expect(sboms).To(HaveLen(2))
	subjects := map[v1.Hash]bool{}
	for _, d := range sboms {
		g.Expect(d.Platform).To(Equal(&v1.Platform{OS: "unknown", Architecture: "unknown"}))
		g.Expect(d.ArtifactType).To(Equal("application/spdx+json"))
		var m v1.Manifest
		g.Expect(json.Unmarshal(blob(d.Digest), &m)).To(Succeed())
		g.Expect(m.ArtifactType).To(Equal("application/spdx+json"))
		g.Expect(m.Subject).NotTo(BeNil())
		subject, ok := runnable[m.Subject.Digest]
		g.Expect(ok).To(BeTrue(), "the subject is a platform image of the index")
		g.Expect(m.Subject.MediaType).To(Equal(subject.MediaType))
		g.Expect(m.Subject.Size).To(Equal(subject.Size))
		subjects[m.Subject.Digest] = true
		g.Expect(m.Config.MediaType).To(BeEquivalentTo("application/vnd.oci.empty.v1+json"))
		g.Expect(blob(m.Config.Digest)).To(Equal([]byte("{}")))
		g.Expect(m.Layers).To(HaveLen(1))
		g.Expect(m.Layers[0].MediaType).To(BeEquivalentTo("application/spdx+json"))
		g.Expect(blob(m.Layers[0].Digest)).To(Equal(img.SBOM))
	}
	g.Expect(subjects).To(HaveLen(2), "one SBOM artifact per platform image")
}

// spdx is the part of an SPDX 2.3 document the test reads.
type spdx struct {
	SPDXVersion       string `json:"spdxVersion"`
	DocumentNamespace string `json:"documentNamespace"`
	Packages          []struct {
		Name        string `json:"name"`
		SPDXID      string `json:"SPDXID"`
		VersionInfo string `json:"versionInfo"`
		Comment     string `json:"comment"`
		Checksums   []struct {
			Algorithm     string `json:"algorithm"`
			ChecksumValue string `json:"checksumValue"`
		} `json:"checksums"`
		ExternalRefs []struct {
			ReferenceType    string `json:"referenceType"`
			ReferenceLocator string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
	Relationships []struct {
		From string `json:"spdxElementId"`
		Type string `json:"relationshipType"`
		To   string `json:"relatedSpdxElement"`
	} `json:"relationships"`
}

// TestSBOMListsEveryGoModuleOfTheBinaries checks the webhook's SBOM against the binaries'
// own build information and go.sum: every module with its version and h1 hash, the Go
// version, each platform's binary with its SHA-256, the image by its index digest.
func TestSBOMListsEveryGoModuleOfTheBinaries(t *testing.T) {
	fx := needFixture(t)
	g := NewWithT(t)
	img := fx.images["webhook"]
	var doc spdx
	g.Expect(json.Unmarshal(img.SBOM, &doc)).To(Succeed())
	g.Expect(doc.SPDXVersion).To(Equal("SPDX-2.3"))
	g.Expect(doc.DocumentNamespace).To(HavePrefix("https://github.com/capov/capov/spdx/capov-webhook/" + testTag + "-"))

	byID := map[string]int{}
	byName := map[string]int{}
	for i, p := range doc.Packages {
		g.Expect(byID).NotTo(HaveKey(p.SPDXID), "unique SPDXID")
		g.Expect(p.SPDXID).To(MatchRegexp(`^SPDXRef-[a-zA-Z0-9.-]+$`))
		byID[p.SPDXID] = i
		byName[p.Name+"@"+p.VersionInfo] = i
	}
	related := func(from, typ string) []string {
		var to []string
		for _, r := range doc.Relationships {
			if r.From == from && r.Type == typ {
				g.Expect(byID).To(HaveKey(r.To))
				to = append(to, doc.Packages[byID[r.To]].Name+"@"+doc.Packages[byID[r.To]].VersionInfo)
			}
		}
		return to
	}
	described := related("SPDXRef-DOCUMENT", "DESCRIBES")
	g.Expect(described).To(Equal([]string{"ghcr.io/capov/capov-webhook@" + testTag}))
	imageID := doc.Packages[byName[described[0]]].SPDXID
	g.Expect(related(imageID, "CONTAINS")).To(ContainElement(HavePrefix("golang.org/x/crypto/x509roots/fallback@")), "the CA bundle")
	ca := doc.Packages[byID["SPDXRef-File-ca-bundle"]]
	caFile := flatten(t, platformImages(t, img.Index)["linux/amd64"])["/etc/ssl/certs/ca-certificates.crt"].data
	g.Expect(ca.Checksums[0].ChecksumValue).To(Equal(fmt.Sprintf("%x", sha256.Sum256(caFile))))

	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	g.Expect(err).NotTo(HaveOccurred())
	var binaries []string
	for _, r := range doc.Relationships {
		if r.From == imageID && r.Type == "CONTAINS" && strings.HasPrefix(r.To, "SPDXRef-Package-binary-") {
			binaries = append(binaries, r.To)
		}
	}
	g.Expect(binaries).To(HaveLen(len(fx.specs["webhook"].Platforms)), "one binary per platform")
	for platform, path := range fx.binaries["webhook"] {
		info, err := buildinfo.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		binID := ""
		for _, id := range binaries {
			if strings.Contains(id, strings.ReplaceAll(platform, "/", "-")) {
				binID = id
			}
		}
		g.Expect(binID).NotTo(BeEmpty(), platform)
		g.Expect(doc.Packages[byID[binID]].Checksums[0].ChecksumValue).To(Equal(fileSHA256(t, path)))
		pimg := platformImages(t, img.Index)[indexPlatform(platform)]
		g.Expect(pimg).NotTo(BeNil(), platform)
		manifestDigest, err := pimg.Digest()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(doc.Packages[byID[binID]].Comment).To(ContainSubstring("manifest "+manifestDigest.String()), "the binary names its image manifest")
		g.Expect(related(binID, "GENERATED_FROM")).To(Equal([]string{"github.com/capov/capov@" + testVersion}))

		deps := related(binID, "DEPENDS_ON")
		g.Expect(deps).To(ContainElement("stdlib@" + info.GoVersion))
		g.Expect(deps).To(HaveLen(len(info.Deps)+1), "every module and the standard library")
		for _, dep := range info.Deps {
			key := dep.Path + "@" + dep.Version
			if dep.Replace != nil {
				g.Expect(dep.Replace.Path).To(Equal("./apis"), "only the API module is replaced")
				continue
			}
			g.Expect(deps).To(ContainElement(key))
			p := doc.Packages[byName[key]]
			sum, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(dep.Sum, "h1:"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.Checksums).To(HaveLen(1), key)
			g.Expect(p.Checksums[0].Algorithm).To(Equal("SHA256"))
			g.Expect(p.Checksums[0].ChecksumValue).To(Equal(hex.EncodeToString(sum)), key)
			g.Expect(string(goSum)).To(ContainSubstring(dep.Path+" "+dep.Version+" "+dep.Sum+"\n"), "go.sum has %s", key)
			g.Expect(p.ExternalRefs[0].ReferenceLocator).To(HavePrefix("pkg:golang/" + dep.Path + "@"))
		}
	}
	g.Expect(byName).To(HaveKey("sigs.k8s.io/controller-runtime@" + goModVersion(t, "sigs.k8s.io/controller-runtime")))
}

// TestDefaultTagIsTheChartsAppVersion checks that `make images` names the images as
// charts/capov pulls them by default: image.repository and webhook.image.repository, with
// the appVersion as tag when manager.tag and webhook.image.tag are empty.
func TestDefaultTagIsTheChartsAppVersion(t *testing.T) {
	g := NewWithT(t)
	read := func(path string, into any) {
		b, err := os.ReadFile(filepath.Join(root, path))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(yaml.Unmarshal(b, into)).To(Succeed())
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	read("charts/capov/Chart.yaml", &chart)
	var values struct {
		Manager struct {
			Tag string `json:"tag"`
		} `json:"manager"`
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
		Webhook struct {
			Image struct {
				Repository string `json:"repository"`
				Tag        string `json:"tag"`
			} `json:"image"`
		} `json:"webhook"`
	}
	read("charts/capov/values.yaml", &values)
	helpers, err := os.ReadFile(filepath.Join(root, "charts/capov/templates/_helpers.tpl"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(helpers)).To(ContainSubstring(".Values.manager.tag | default .Chart.AppVersion"))
	g.Expect(values.Manager.Tag).To(BeEmpty())
	g.Expect(values.Webhook.Image.Tag).To(BeEmpty())

	tag, err := images.ChartAppVersion(root)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tag).To(Equal(chart.AppVersion))
	refs := map[string]string{}
	for _, s := range images.Products(images.Spec{Tag: tag}) {
		refs[s.Name] = s.Ref()
	}
	g.Expect(refs).To(Equal(map[string]string{
		"capov-manager":  values.Image.Repository + ":" + chart.AppVersion,
		"capov-webhook":  values.Webhook.Image.Repository + ":" + chart.AppVersion,
		"capov-ovirtsim": "ghcr.io/capov/capov-ovirtsim:" + chart.AppVersion,
	}))
}

// TestSpecsThatCannotBeBuiltAreRejected checks the spec validation, before any build.
func TestSpecsThatCannotBeBuiltAreRejected(t *testing.T) {
	valid := images.Spec{Name: "pause", Package: "./cmd/pause", Binary: "/pause", Tag: "e2e"}
	for _, tc := range []struct {
		name   string
		mutate func(*images.Spec)
		want   string
	}{
		{"a spec without tag", func(s *images.Spec) { s.Tag = "" }, "Tag are required"},
		{"a relative binary path", func(s *images.Spec) { s.Binary = "pause" }, "clean absolute path"},
		{"a binary path with dots", func(s *images.Spec) { s.Binary = "/bin/../pause" }, "clean absolute path"},
		{"a tag a registry refuses", func(s *images.Spec) { s.Tag = "not a tag" }, "reference"},
		{"a platform without architecture", func(s *images.Spec) { s.Platforms = []string{"linux"} }, "platform"},
		{"a platform given twice", func(s *images.Spec) { s.Platforms = []string{"linux/arm64", "linux/arm64/v8"} }, "twice"},
		{"a binary missing for a platform", func(*images.Spec) {}, "no binary for linux/amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := valid
			tc.mutate(&s)
			_, err := images.Assemble(context.Background(), s, map[string]string{})
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestAssembleRefusesABinaryOfAnotherPlatform gives the arm64 binary as the amd64 one.
func TestAssembleRefusesABinaryOfAnotherPlatform(t *testing.T) {
	fx := needFixture(t)
	g := NewWithT(t)
	bins := fx.binaries["multiarch"]
	_, err := images.Assemble(context.Background(), fx.specs["multiarch"], map[string]string{
		"linux/amd64": bins["linux/arm64"], "linux/arm64": bins["linux/arm64"],
	})
	g.Expect(err).To(MatchError(ContainSubstring(`GOARCH="arm64", want "amd64"`)))
}

func digest(t *testing.T, img *images.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// goModVersion is the version go.mod requires of a module.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == module {
			return fields[1]
		}
	}
	t.Fatalf("go.mod does not require %s", module)
	return ""
}

// untar unpacks an archive of regular files and directories into dir.
func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			t.Fatalf("archive entry %q escapes the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, b, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("archive entry %q has type %c", h.Name, h.Typeflag)
		}
	}
}
