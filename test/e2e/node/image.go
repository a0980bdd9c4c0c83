package node

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of an OCI layout's index.json that name an image, read by ctr import.
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// nonroot is the user of the images this package writes: that of distroless "nonroot", which
// the product images use, so that file-permission outcomes (a Secret mounted 0440, fsGroup)
// are those of the real images.
const nonroot = "65532:65532"

// Image describes a one-binary image, shaped like a distroless nonroot image: the static
// binary, /etc/passwd and /etc/group with root and nonroot (65532), and /tmp. It runs as
// 65532:65532.
type Image struct {
	// Ref is the full reference the image is imported as, e.g. "e2e.local/app:v1".
	Ref string
	// Binaries maps a platform ("linux/amd64", "linux/arm64") to the static binary of that
	// platform. The archive holds an OCI index with one manifest per platform.
	Binaries map[string]string
	// Path is where the binary sits in the image; the default is /app.
	Path string
	// Args follow Path in the entrypoint.
	Args []string
}

// WriteImageArchive writes img as an OCI image layout in a tar at path: index.json names the
// image index with the org.opencontainers.image.ref.name annotation (the full reference), and
// the index has one manifest per platform, which is what `ctr images import` and the product's
// image archives use.
func WriteImageArchive(path string, img Image) error {
	if img.Ref == "" || len(img.Binaries) == 0 {
		return errors.New("writing image archive: Ref and at least one binary are required")
	}
	if !strings.ContainsAny(img.Ref, "/:@") {
		return fmt.Errorf("writing image archive: %q is no full reference (ctr import would prefix it)", img.Ref)
	}
	binPath := img.Path
	if binPath == "" {
		binPath = "/app"
	}
	platforms := make([]string, 0, len(img.Binaries))
	for p := range img.Binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		os, arch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("writing image archive %s: platform %q is not os/arch", img.Ref, p)
		}
		one, err := binaryImage(img.Binaries[p], binPath, img.Args, os, arch)
		if err != nil {
			return fmt.Errorf("writing image archive %s (%s): %w", img.Ref, p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        one,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: os, Architecture: arch}},
		})
	}

	dir, err := os.MkdirTemp(filepath.Dir(path), ".oci-layout-")
	if err != nil {
		return fmt.Errorf("writing image archive %s: %w", img.Ref, err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout of %s: %w", img.Ref, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{annotationRefName: img.Ref})); err != nil {
		return fmt.Errorf("writing OCI layout of %s: %w", img.Ref, err)
	}
	if err := tarDir(dir, path); err != nil {
		return fmt.Errorf("writing image archive %s: %w", img.Ref, err)
	}
	return nil
}

// binaryImage is the single-platform image of one binary.
func binaryImage(binary, binPath string, args []string, goos, arch string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnonroot:x:65532:\n"
	entries := make([]tarEntry, 0, 8)
	for _, d := range parentDirs(strings.TrimPrefix(binPath, "/")) {
		entries = append(entries, tarEntry{name: d, mode: 0o755, dir: true})
	}
	entries = append(entries,
		tarEntry{name: "etc/", mode: 0o755, dir: true},
		tarEntry{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		tarEntry{name: "etc/group", mode: 0o644, data: []byte(group)},
		tarEntry{name: "tmp/", mode: 0o1777, dir: true},
		tarEntry{name: "home/", mode: 0o755, dir: true},
		tarEntry{name: "home/nonroot/", mode: 0o755, dir: true, uid: 65532},
		tarEntry{name: strings.TrimPrefix(binPath, "/"), mode: 0o755, data: data},
	)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Typeflag: tar.TypeReg, Size: int64(len(e.data)), Uid: e.uid, Gid: e.uid, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing layer: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("writing layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing layer: %w", err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("making layer: %w", err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("appending layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = goos, arch
	cfg.Config.User = nonroot
	cfg.Config.Entrypoint = append([]string{binPath}, args...)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("writing config: %w", err)
	}
	return img, nil
}

// tarEntry is one file or directory of an image layer.
type tarEntry struct {
	name string
	mode int64
	data []byte
	dir  bool
	uid  int
}

// parentDirs lists the directories above a relative file path, outermost first
// ("usr/local/bin/x" gives "usr/", "usr/local/", "usr/local/bin/").
func parentDirs(rel string) []string {
	var out []string
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		out = append(out, strings.Join(parts[:i], "/")+"/")
	}
	return out
}

// tarDir writes the regular files and directories under dir into a tar at out (through a
// temporary name, so that out is complete or absent).
func tarDir(dir, out string) error {
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	walkErr := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err := errors.Join(walkErr, tw.Close(), f.Close()); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, out)
}

// archiveImageNames reads the image names an archive announces: in an OCI layout, the
// io.containerd.image.name or org.opencontainers.image.ref.name annotations of index.json; in
// a docker archive, the RepoTags of manifest.json. A bare ref.name such as "v1" is returned as
// is, for the caller to reject.
func archiveImageNames(path string) ([]string, error) {
	images, err := archiveImages(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(images))
	for _, i := range images {
		names = append(names, i.name)
	}
	return names, nil
}

// archiveImage is an image an archive announces: its name and, in an OCI layout, the digest of
// what the name points to (an index or a manifest).
type archiveImage struct{ name, digest string }

// digestRef is the reference by digest of an image of an OCI layout: its name without the tag,
// @ its digest ("" when the archive says no digest).
func (i archiveImage) digestRef() string {
	if i.digest == "" {
		return ""
	}
	repo := i.name
	if slash, colon := strings.LastIndex(repo, "/"), strings.LastIndex(repo, ":"); colon > slash {
		repo = repo[:colon]
	}
	return repo + "@" + i.digest
}

func archiveImages(path string) ([]archiveImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the archive has neither index.json (OCI layout) nor manifest.json (docker archive)")
		}
		if err != nil {
			return nil, fmt.Errorf("reading archive: %w", err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case "index.json":
			var idx v1.IndexManifest
			if err := json.NewDecoder(tr).Decode(&idx); err != nil {
				return nil, fmt.Errorf("reading index.json: %w", err)
			}
			var images []archiveImage
			for _, m := range idx.Manifests {
				if n := m.Annotations[annotationContainerdName]; n != "" {
					images = append(images, archiveImage{n, m.Digest.String()})
				} else if n := m.Annotations[annotationRefName]; n != "" {
					images = append(images, archiveImage{n, m.Digest.String()})
				}
			}
			return images, nil
		case "manifest.json":
			var m []struct{ RepoTags []string }
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				return nil, fmt.Errorf("reading manifest.json: %w", err)
			}
			var images []archiveImage
			for _, e := range m {
				for _, t := range e.RepoTags {
					images = append(images, archiveImage{name: normalizeDockerRef(t)})
				}
			}
			return images, nil
		}
	}
}

// normalizeDockerRef turns a short docker name into the full reference containerd stores
// ("app:v1" is "docker.io/library/app:v1").
func normalizeDockerRef(ref string) string {
	first, _, hasSlash := strings.Cut(ref, "/")
	switch {
	case !hasSlash:
		return "docker.io/library/" + ref
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		return "docker.io/" + ref
	default:
		return ref
	}
}
