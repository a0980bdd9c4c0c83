package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"
)

// helmGzipExtra and helmGzipComment are the gzip header fields Helm writes into every chart
// archive (helm.sh/helm/v3/pkg/chartutil.Save), copied so that our archives carry them too.
var helmGzipExtra = []byte("+aHR0cHM6Ly95b3V0dS5iZS96OVV6MWljandyTQo=")

const helmGzipComment = "Helm"

// PackageChart writes the chart in dir as <outDir>/<name>-<version>.tgz, as `helm package
// --version <version> --app-version <appVersion>` does, but reproducibly: Helm's own writer
// (chartutil.Save) stamps time.Now() on every entry, so two packages of one chart never have
// the same checksum. This writer loads the chart with Helm's loader (which applies
// .helmignore), stamps the versions into its metadata and writes the entries Helm writes, in
// Helm's order (Chart.yaml re-marshalled from the metadata, values.yaml, values.schema.json,
// the templates, the other files, each under <name>/), with Helm's modes, owners and gzip
// header, and mtime as every entry's modification time. editValues, when not nil, rewrites the
// text of values.yaml (the release points the image repositories at its registry). It returns
// the archive's path.
func PackageChart(dir, outDir, version, appVersion string, mtime time.Time, editValues func([]byte) ([]byte, error)) (string, error) {
	c, err := loader.LoadDir(dir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", dir, err)
	}
	c.Metadata.Version = version
	c.Metadata.AppVersion = appVersion
	if err := c.Validate(); err != nil {
		return "", fmt.Errorf("chart %s: %w", dir, err)
	}
	if editValues != nil {
		for _, f := range c.Raw {
			if f.Name == "values.yaml" {
				if f.Data, err = editValues(f.Data); err != nil {
					return "", fmt.Errorf("chart %s: %w", c.Name(), err)
				}
			}
		}
	}
	if len(c.Dependencies()) > 0 || c.Lock != nil {
		// Neither chart has dependencies; packaging them would need Helm's dependency checks.
		return "", fmt.Errorf("chart %s has dependencies, which PackageChart does not package", c.Name())
	}
	var buf bytes.Buffer
	if err := writeChartArchive(&buf, c, mtime); err != nil {
		return "", fmt.Errorf("packaging chart %s: %w", c.Name(), err)
	}
	out := filepath.Join(outDir, fmt.Sprintf("%s-%s.tgz", c.Name(), c.Metadata.Version))
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	return out, nil
}

// writeChartArchive is chartutil.Save's writeTarContents for a chart without dependencies,
// with a fixed modification time.
func writeChartArchive(w *bytes.Buffer, c *chart.Chart, mtime time.Time) error {
	zw := gzip.NewWriter(w)
	zw.Header.Extra = helmGzipExtra
	zw.Header.Comment = helmGzipComment
	tw := tar.NewWriter(zw)
	add := func(name string, body []byte) error {
		h := &tar.Header{
			Name:    path.Join(c.Name(), filepath.ToSlash(name)),
			Mode:    0o644,
			Size:    int64(len(body)),
			ModTime: mtime,
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}

	meta, err := yaml.Marshal(c.Metadata)
	if err != nil {
		return err
	}
	if err := add("Chart.yaml", meta); err != nil {
		return err
	}
	for _, f := range c.Raw {
		if f.Name == "values.yaml" {
			if err := add("values.yaml", f.Data); err != nil {
				return err
			}
		}
	}
	if c.Schema != nil {
		if !json.Valid(c.Schema) {
			return errors.New("invalid JSON in values.schema.json")
		}
		if err := add("values.schema.json", c.Schema); err != nil {
			return err
		}
	}
	for _, f := range c.Templates {
		if err := add(f.Name, f.Data); err != nil {
			return err
		}
	}
	for _, f := range c.Files {
		if err := add(f.Name, f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}
