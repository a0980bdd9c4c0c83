package node

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func TestDigestRefDropsOnlyTheTag(t *testing.T) {
	g := NewWithT(t)
	g.Expect(archiveImage{"localhost:5000/team/app:v1", "sha256:ab"}.digestRef()).To(Equal("localhost:5000/team/app@sha256:ab"))
	g.Expect(archiveImage{"localhost:5000/app", "sha256:ab"}.digestRef()).To(Equal("localhost:5000/app@sha256:ab"))
	g.Expect(archiveImage{"docker.io/library/app:v1", ""}.digestRef()).To(BeEmpty(), "a docker archive says no digest")
}

func TestWriteImageArchive(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, "bin-"+arch)
		g.Expect(os.WriteFile(p, []byte("#!binary "+arch), 0o755)).To(Succeed())
		bins["linux/"+arch] = p
	}
	archive := filepath.Join(dir, "app.tar")
	g.Expect(WriteImageArchive(archive, Image{Ref: "e2e.local/app:v1", Binaries: bins, Args: []string{"serve"}})).To(Succeed())

	names, err := archiveImageNames(archive)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{"e2e.local/app:v1"}))

	// Unpack the layout and read it back as an image index of two platforms.
	lp := filepath.Join(dir, "layout")
	g.Expect(untar(archive, lp)).To(Succeed())
	root, err := layout.ImageIndexFromPath(lp)
	g.Expect(err).NotTo(HaveOccurred())
	rootManifest, err := root.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rootManifest.Manifests).To(HaveLen(1))
	g.Expect(rootManifest.Manifests[0].Annotations).To(HaveKeyWithValue(annotationRefName, "e2e.local/app:v1"))
	// ImportImage records the image by digest too, as a pull does: a pod may pin it.
	imported, err := archiveImages(archive)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(imported).To(HaveLen(1))
	g.Expect(imported[0].digestRef()).To(Equal("e2e.local/app@" + rootManifest.Manifests[0].Digest.String()))
	idx, err := root.ImageIndex(rootManifest.Manifests[0].Digest)
	g.Expect(err).NotTo(HaveOccurred())
	im, err := idx.IndexManifest()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(im.MediaType)).To(Equal("application/vnd.oci.image.index.v1+json"))
	g.Expect(im.Manifests).To(HaveLen(2))
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := img.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.OS + "/" + cfg.Architecture).To(Equal(m.Platform.OS + "/" + m.Platform.Architecture))
		g.Expect(cfg.Config.User).To(Equal("65532:65532"))
		g.Expect(cfg.Config.Entrypoint).To(Equal([]string{"/app", "serve"}))

		files := map[string][]byte{}
		tr := tar.NewReader(mutate.Extract(img))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			g.Expect(err).NotTo(HaveOccurred())
			b, _ := io.ReadAll(tr)
			files[h.Name] = b
		}
		g.Expect(string(files["app"])).To(Equal("#!binary " + cfg.Architecture))
		g.Expect(string(files["etc/passwd"])).To(ContainSubstring("nonroot:x:65532:65532:"))
		g.Expect(files).To(Or(HaveKey("tmp"), HaveKey("tmp/")))
	}
}

func TestWriteImageArchiveRejects(t *testing.T) {
	for name, img := range map[string]Image{
		"a reference without a registry or tag": {Ref: "app", Binaries: map[string]string{"linux/amd64": "/bin/true"}},
		"no binary":                             {Ref: "e2e.local/app:v1"},
		"a platform that is not os/arch":        {Ref: "e2e.local/app:v1", Binaries: map[string]string{"amd64": "/bin/true"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(WriteImageArchive(filepath.Join(t.TempDir(), "x.tar"), img)).NotTo(Succeed())
		})
	}
}

func TestArchiveImageNamesOfADockerArchive(t *testing.T) {
	g := NewWithT(t)
	manifest, err := json.Marshal([]map[string]any{{"RepoTags": []string{"app:v1", "example/app:v2", "registry.local:5000/x/app:v3"}}})
	g.Expect(err).NotTo(HaveOccurred())
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	g.Expect(tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o644, Size: int64(len(manifest))})).To(Succeed())
	_, err = tw.Write(manifest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tw.Close()).To(Succeed())
	archive := filepath.Join(t.TempDir(), "docker.tar")
	g.Expect(os.WriteFile(archive, buf.Bytes(), 0o644)).To(Succeed())

	names, err := archiveImageNames(archive)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{"docker.io/library/app:v1", "docker.io/example/app:v2", "registry.local:5000/x/app:v3"}))
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
}
