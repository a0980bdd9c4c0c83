package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// AnnotationRefName is the OCI annotation that names an image of an image layout; set to
	// the full reference, which `ctr images import`, skopeo's oci-archive: and crane read.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is containerd's own name annotation, set to the same
	// reference: containerd prefers it to AnnotationRefName and applies no --base-name or
	// prefix rule to it, so the image is named the same whatever the import flags.
	AnnotationContainerdName = "io.containerd.image.name"

	// emptyJSON is the OCI 1.1 empty config of an artifact manifest.
	emptyJSON = "{}"
)

// blob is one file under blobs/sha256 of an image layout.
type blob struct {
	size int64
	open func() (io.ReadCloser, error)
}

// WriteOCIArchive writes the images as an OCI archive: a tar of an OCI image layout
// (oci-layout, index.json, blobs/sha256/...), what `ctr images import`, `kind load
// image-archive`, `skopeo copy oci-archive:` and, unpacked, `crane push` read. index.json
// holds one entry per image, its image index annotated with the reference
// (AnnotationRefName and AnnotationContainerdName). The SBOM artifacts are inside the image
// indexes (see Assemble), so they travel with every copy of an index.
//
// The archive is reproducible: entries in a fixed order, epoch mtimes, numeric root owners.
// It is written to a temporary file next to path and renamed, so path is whole or absent.
func WriteOCIArchive(path string, imgs ...*Image) error {
	blobs := map[v1.Hash]blob{}
	top := make([]v1.Descriptor, 0, len(imgs))
	for _, img := range imgs {
		desc, err := collect(img, blobs)
		if err != nil {
			return fmt.Errorf("writing %s: %w", img.Ref(), err)
		}
		top = append(top, desc)
	}
	index, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: top})
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}

	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := writeLayout(tmp, index, blobs); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// collect adds every blob of the image to blobs and returns its index.json descriptor.
func collect(img *Image, blobs map[v1.Hash]blob) (v1.Descriptor, error) {
	addBytes := func(b []byte) error {
		h, n, err := v1.SHA256(bytes.NewReader(b))
		if err != nil {
			return err
		}
		blobs[h] = blob{size: n, open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }}
		return nil
	}
	raw, err := img.Index.RawManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	if err := addBytes(raw); err != nil {
		return v1.Descriptor{}, err
	}
	im, err := img.Index.IndexManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	for _, d := range im.Manifests {
		child, err := img.Index.Image(d.Digest)
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("manifest %s: %w", d.Digest, err)
		}
		for _, part := range []func() ([]byte, error){child.RawManifest, child.RawConfigFile} {
			b, err := part()
			if err != nil {
				return v1.Descriptor{}, fmt.Errorf("manifest %s: %w", d.Digest, err)
			}
			if err := addBytes(b); err != nil {
				return v1.Descriptor{}, err
			}
		}
		layers, err := child.Layers()
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("manifest %s: %w", d.Digest, err)
		}
		for _, l := range layers {
			h, err := l.Digest()
			if err != nil {
				return v1.Descriptor{}, err
			}
			n, err := l.Size()
			if err != nil {
				return v1.Descriptor{}, err
			}
			blobs[h] = blob{size: n, open: l.Compressed}
		}
	}
	desc, err := partial.Descriptor(img.Index)
	if err != nil {
		return v1.Descriptor{}, err
	}
	ref := img.Ref()
	desc.Annotations = map[string]string{AnnotationRefName: ref, AnnotationContainerdName: ref}
	return *desc, nil
}

// artifact is an OCI 1.1 artifact manifest with the empty config and one blob, as a
// v1.Image (partial.CompressedImageCore) so that indexes and layouts handle it like any
// manifest.
type artifact struct {
	manifest []byte
	blob     v1.Layer
}

// sbomArtifact attaches the SBOM to subject: artifactType application/spdx+json, the empty
// config, the document as the one layer (titled title), dated created.
func sbomArtifact(sbom []byte, subject v1.Descriptor, created time.Time, title string) (v1.Image, error) {
	layer := static.NewLayer(sbom, SBOMMediaType)
	digest, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	emptyDigest, emptySize, err := v1.SHA256(bytes.NewReader([]byte(emptyJSON)))
	if err != nil {
		return nil, err
	}
	m, err := json.Marshal(v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMMediaType,
		Config:        v1.Descriptor{MediaType: types.OCIEmptyJSON, Digest: emptyDigest, Size: emptySize, Data: []byte(emptyJSON)},
		Layers: []v1.Descriptor{{
			MediaType:   SBOMMediaType,
			Digest:      digest,
			Size:        int64(len(sbom)),
			Annotations: map[string]string{"org.opencontainers.image.title": title},
		}},
		Subject:     &subject,
		Annotations: map[string]string{"org.opencontainers.image.created": created.UTC().Format(time.RFC3339)},
	})
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&artifact{manifest: m, blob: layer})
}

// RawManifest is the artifact manifest.
func (a *artifact) RawManifest() ([]byte, error) { return a.manifest, nil }

// RawConfigFile is the OCI empty config.
func (a *artifact) RawConfigFile() ([]byte, error) { return []byte(emptyJSON), nil }

// MediaType is the OCI image manifest type (OCI 1.1 artifacts are image manifests).
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// LayerByDigest returns the SBOM blob.
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.blob.Digest(); err == nil && d == h {
		return a.blob, nil
	}
	return nil, fmt.Errorf("artifact has no blob %s", h)
}

// writeLayout writes the layout's tar: oci-layout, index.json, then the blobs by digest.
func writeLayout(w io.Writer, index []byte, blobs map[v1.Hash]blob) error {
	tw := tar.NewWriter(w)
	header := func(name string, typ byte, mode, size int64) error {
		return tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: size, ModTime: time.Unix(0, 0)})
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index}} {
		if err := header(f.name, tar.TypeReg, 0o644, int64(len(f.data))); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	for _, dir := range []string{"blobs/", "blobs/sha256/"} {
		if err := header(dir, tar.TypeDir, 0o755, 0); err != nil {
			return err
		}
	}
	digests := make([]v1.Hash, 0, len(blobs))
	for h := range blobs {
		digests = append(digests, h)
	}
	sort.Slice(digests, func(i, j int) bool { return digests[i].String() < digests[j].String() })
	for _, h := range digests {
		b := blobs[h]
		if err := header("blobs/"+h.Algorithm+"/"+h.Hex, tar.TypeReg, 0o644, b.size); err != nil {
			return err
		}
		r, err := b.open()
		if err != nil {
			return fmt.Errorf("blob %s: %w", h, err)
		}
		n, err := io.Copy(tw, r)
		r.Close()
		if err != nil {
			return fmt.Errorf("blob %s: %w", h, err)
		}
		if n != b.size {
			return fmt.Errorf("blob %s: %d bytes, its descriptor says %d", h, n, b.size)
		}
	}
	return tw.Close()
}
