package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of a layer.
type entry struct {
	// name is the path inside the image without the leading slash, e.g. "etc/passwd".
	name string
	// dir makes the entry a directory; data and src are then unused.
	dir bool
	// mode holds the permission bits, including the sticky bit (os.ModeSticky is not used:
	// tar headers carry the Unix bits as they are).
	mode     int64
	uid, gid int
	// data is the content of a small file; src names a file on disk to copy instead.
	data []byte
	src  string
}

// layer is an OCI layer kept in memory: the gzip-compressed tar and both of its digests.
// It implements v1.Layer.
type layer struct {
	compressed []byte
	digest     v1.Hash
	diffID     v1.Hash
}

var _ v1.Layer = (*layer)(nil)

// newLayer writes the entries as a reproducible tar: entries sorted by name, fixed mtimes,
// numeric owners only (no user or group names), no access or change times. The same entries
// give the same bytes, hence the same digests.
func newLayer(entries []entry) (*layer, error) {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })

	var gz bytes.Buffer
	compressedSum := sha256.New()
	zw, err := gzip.NewWriterLevel(io.MultiWriter(&gz, compressedSum), gzip.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("creating the gzip writer: %w", err)
	}
	diffSum := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(zw, diffSum))
	for i, e := range sorted {
		if i > 0 && sorted[i-1].name == e.name {
			return nil, fmt.Errorf("layer has %q twice", e.name)
		}
		if err := writeEntry(tw, e); err != nil {
			return nil, fmt.Errorf("writing %s to the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer tar: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer gzip stream: %w", err)
	}
	return &layer{
		compressed: gz.Bytes(),
		digest:     v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", compressedSum.Sum(nil))},
		diffID:     v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", diffSum.Sum(nil))},
	}, nil
}

// writeEntry writes one header and, for a file, its content.
func writeEntry(tw *tar.Writer, e entry) error {
	if e.name == "" || strings.HasPrefix(e.name, "/") || path.Clean(e.name) != e.name {
		return fmt.Errorf("entry name %q is not a clean relative path", e.name)
	}
	h := &tar.Header{
		Name: e.name,
		Mode: e.mode,
		Uid:  e.uid,
		Gid:  e.gid,
		// Every file of every layer has the Unix epoch as mtime (as ko and SOURCE_DATE_EPOCH=0
		// builds do): the layers then depend on their content alone, so the base layer keeps
		// its digest from one release to the next and registries and nodes share it.
		ModTime: time.Unix(0, 0),
	}
	if e.dir {
		h.Typeflag = tar.TypeDir
		h.Name += "/"
		return tw.WriteHeader(h)
	}
	h.Typeflag = tar.TypeReg
	if e.src == "" {
		h.Size = int64(len(e.data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(e.data)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err != nil {
		return err
	}
	if n != h.Size {
		return fmt.Errorf("%s changed size while being read (%d of %d bytes)", e.src, n, h.Size)
	}
	return nil
}

// Digest is the SHA-256 of the compressed layer.
func (l *layer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID is the SHA-256 of the uncompressed tar.
func (l *layer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Compressed returns the gzip stream.
func (l *layer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.compressed)), nil
}

// Uncompressed returns the tar stream.
func (l *layer) Uncompressed() (io.ReadCloser, error) {
	zr, err := gzip.NewReader(bytes.NewReader(l.compressed))
	if err != nil {
		return nil, fmt.Errorf("reading the layer: %w", err)
	}
	return zr, nil
}

// Size is the size of the compressed layer.
func (l *layer) Size() (int64, error) { return int64(len(l.compressed)), nil }

// MediaType is the OCI gzip layer type.
func (l *layer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
