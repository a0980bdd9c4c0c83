//go:build linux

package guest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/google/go-containerregistry/pkg/name"
)

// ImageSpec is a container image the guests' containerd imports at first boot (the
// template's preloaded images): files at their paths, an entrypoint, a user.
type ImageSpec struct {
	// Ref is the image's full reference, e.g. "registry.k8s.io/kube-apiserver:v1.36.3".
	Ref string
	// Files maps a path in the image to a file of the host (a binary built from modules), with
	// the shared libraries it loads, if any.
	Files map[string]string
	// HostPrograms are programs of the host copied to the same path in the image with the
	// shared libraries they load (ELF DT_NEEDED, recursively) and HostDirs, so that a
	// dynamically linked Debian program (iptables, cp) runs in the image as on the host.
	HostPrograms []string
	// HostDirs are host directories copied whole (iptables' extension modules).
	HostDirs []string
	// Symlinks maps a path in the image to its target.
	Symlinks map[string]string
	// Entrypoint and Cmd of the image config.
	Entrypoint, Cmd []string
	// User is the config's user ("" is root).
	User string
}

// libDirs are where the dynamic loader of a Debian amd64 host finds libraries.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib", "/lib"}

// WriteImage writes spec as a docker-archive tar at path, which `ctr images import` reads.
func WriteImage(path string, spec ImageSpec) error {
	ref, err := name.ParseReference(spec.Ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image %q: %w", spec.Ref, err)
	}
	tag, ok := ref.(name.Tag)
	if !ok {
		return fmt.Errorf("image %q: a tag is required", spec.Ref)
	}
	entries := map[string]layerEntry{}
	addFile := func(dst, src string) error {
		st, err := os.Stat(src)
		if err != nil {
			return err
		}
		entries[strings.TrimPrefix(filepath.Clean(dst), "/")] = layerEntry{src: src, mode: int64(st.Mode().Perm())}
		return nil
	}
	libs := map[string]bool{}
	for dst, src := range spec.Files {
		if err := addFile(dst, src); err != nil {
			return fmt.Errorf("image %s: %w", spec.Ref, err)
		}
		// A binary built with cgo (flanneld) needs the host's C library.
		if err := neededLibs(src, libs); err != nil {
			return fmt.Errorf("image %s: libraries of %s: %w", spec.Ref, src, err)
		}
	}
	for _, p := range spec.HostPrograms {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.Ref, err)
		}
		if err := addFile(real, real); err != nil {
			return fmt.Errorf("image %s: %w", spec.Ref, err)
		}
		if real != p {
			entries[strings.TrimPrefix(p, "/")] = layerEntry{link: real}
		}
		if err := neededLibs(real, libs); err != nil {
			return fmt.Errorf("image %s: libraries of %s: %w", spec.Ref, p, err)
		}
	}
	for _, d := range spec.HostDirs {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if e.Type()&os.ModeSymlink != 0 {
				t, err := os.Readlink(p)
				if err != nil {
					return err
				}
				entries[strings.TrimPrefix(p, "/")] = layerEntry{link: t}
				return nil
			}
			if err := addFile(p, p); err != nil {
				return err
			}
			return neededLibs(p, libs)
		})
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.Ref, err)
		}
	}
	for lib := range libs {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return fmt.Errorf("image %s: %w", spec.Ref, err)
		}
		if err := addFile(real, real); err != nil {
			return fmt.Errorf("image %s: %w", spec.Ref, err)
		}
		if real != lib {
			entries[strings.TrimPrefix(lib, "/")] = layerEntry{link: real}
		}
	}
	for dst, target := range spec.Symlinks {
		entries[strings.TrimPrefix(filepath.Clean(dst), "/")] = layerEntry{link: target}
	}
	entries["etc/passwd"] = layerEntry{data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), mode: 0o644}
	entries["etc/group"] = layerEntry{data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"), mode: 0o644}
	entries["tmp"] = layerEntry{dir: true, mode: 0o1777}
	layer, err := writeLayer(entries)
	if err != nil {
		return fmt.Errorf("image %s: %w", spec.Ref, err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.DockerManifestSchema2), types.DockerConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.User = spec.Entrypoint, spec.Cmd, spec.User
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		return fmt.Errorf("writing image %s: %w", spec.Ref, err)
	}
	return os.Rename(tmp, path)
}

// layerEntry is a file, directory or symlink of a layer.
type layerEntry struct {
	src  string // host file to copy
	data []byte // or content
	link string // or symlink target
	dir  bool
	mode int64
}

// writeLayer writes a normalised tar layer: sorted names, parents first, root-owned.
func writeLayer(entries map[string]layerEntry) (v1.Layer, error) {
	all := map[string]layerEntry{}
	for p, e := range entries {
		all[p] = e
		for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = layerEntry{dir: true, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: n, Mode: e.mode, Format: tar.FormatPAX}
		var data []byte
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, n+"/"
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
		case e.src != "":
			b, err := os.ReadFile(e.src)
			if err != nil {
				return nil, err
			}
			data = b
		default:
			data = e.data
		}
		if h.Typeflag == 0 {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
}

// neededLibs adds the shared libraries an ELF file needs, recursively, and the dynamic loader.
func neededLibs(path string, into map[string]bool) error {
	f, err := elf.Open(path)
	if err != nil {
		if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "bad magic") {
			return nil // not an ELF file
		}
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err == nil {
				into[strings.TrimRight(string(b), "\x00")] = true
			}
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil // static
	}
	for _, lib := range needed {
		found := ""
		for _, d := range libDirs {
			if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
				found = filepath.Join(d, lib)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("%s needs %s, which is not in %v", path, lib, libDirs)
		}
		if into[found] {
			continue
		}
		into[found] = true
		if err := neededLibs(found, into); err != nil {
			return err
		}
	}
	return nil
}
