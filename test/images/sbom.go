package images

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

// SBOMMediaType is the media type of the SPDX JSON document, also the artifactType of the
// manifest that attaches it to the image index.
const SBOMMediaType = "application/spdx+json"

// caBundleModule is the Go module the CA bundle comes from.
const caBundleModule = "golang.org/x/crypto/x509roots/fallback"

// The SPDX 2.3 JSON subset this package writes (https://spdx.github.io/spdx-spec/v2.3/).
type (
	spdxDocument23 struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      spdxCreationInfo   `json:"creationInfo"`
		Packages          []spdxPackage      `json:"packages"`
		Relationships     []spdxRelationship `json:"relationships"`
	}
	spdxCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	spdxPackage struct {
		Name                  string            `json:"name"`
		SPDXID                string            `json:"SPDXID"`
		VersionInfo           string            `json:"versionInfo,omitempty"`
		Supplier              string            `json:"supplier,omitempty"`
		DownloadLocation      string            `json:"downloadLocation"`
		FilesAnalyzed         bool              `json:"filesAnalyzed"`
		Checksums             []spdxChecksum    `json:"checksums,omitempty"`
		LicenseConcluded      string            `json:"licenseConcluded"`
		LicenseDeclared       string            `json:"licenseDeclared"`
		CopyrightText         string            `json:"copyrightText"`
		Comment               string            `json:"comment,omitempty"`
		ExternalRefs          []spdxExternalRef `json:"externalRefs,omitempty"`
		PrimaryPackagePurpose string            `json:"primaryPackagePurpose,omitempty"`
	}
	spdxChecksum struct {
		Algorithm     string `json:"algorithm"`
		ChecksumValue string `json:"checksumValue"`
	}
	spdxExternalRef struct {
		ReferenceCategory string `json:"referenceCategory"`
		ReferenceType     string `json:"referenceType"`
		ReferenceLocator  string `json:"referenceLocator"`
	}
	spdxRelationship struct {
		SPDXElementID      string `json:"spdxElementId"`
		RelationshipType   string `json:"relationshipType"`
		RelatedSPDXElement string `json:"relatedSpdxElement"`
	}
)

// spdxDocument describes the image, its binary on every platform (file SHA-256, the digest of
// the platform's image manifest, Go version, build settings), and every Go module each binary links, from the
// binary's own build information: path, version, the go.sum h1 hash (as a SHA256 checksum,
// hex, and verbatim in the comment) and a pkg:golang purl. The main module is the version
// stamped into the binaries; the Go standard library is the package "stdlib" at the Go
// version. Nothing depends on the clock: the document is dated at the image's creation time
// and its namespace ends with a hash of its content.
func spdxDocument(spec Spec, created time.Time, binaries []builtBinary, ca []byte) ([]byte, error) {
	repo := spec.Registry + "/" + spec.Name
	imageID := "SPDXRef-Package-image"
	doc := spdxDocument23{
		SPDXVersion:  "SPDX-2.3",
		DataLicense:  "CC0-1.0",
		SPDXID:       "SPDXRef-DOCUMENT",
		Name:         spec.Ref(),
		CreationInfo: spdxCreationInfo{Created: created.UTC().Format(time.RFC3339), Creators: []string{"Organization: CAPOV", "Tool: capov-test-images"}},
	}
	doc.Packages = append(doc.Packages, spdxPackage{
		Name:             repo,
		SPDXID:           imageID,
		VersionInfo:      spec.Tag,
		DownloadLocation: "NOASSERTION",
		LicenseConcluded: "NOASSERTION",
		LicenseDeclared:  spec.License,
		CopyrightText:    "NOASSERTION",
		Comment:          fmt.Sprintf("the OCI image %s, platforms %s", spec.Ref(), strings.Join(spec.Platforms, ", ")),
		ExternalRefs: []spdxExternalRef{purlRef(fmt.Sprintf("pkg:oci/%s?repository_url=%s&tag=%s",
			spec.Name, url.QueryEscape(repo), url.QueryEscape(spec.Tag)))},
		PrimaryPackagePurpose: "CONTAINER",
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", imageID})

	modules := map[string]spdxPackage{}
	addModule := func(p spdxPackage) string {
		if _, ok := modules[p.SPDXID]; !ok {
			modules[p.SPDXID] = p
		}
		return p.SPDXID
	}
	doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", addModule(caBundlePackage(ca))})
	for _, b := range binaries {
		binID := spdxID("SPDXRef-Package-binary-" + b.platform.String())
		settings := make([]string, 0, len(b.info.Settings))
		for _, s := range b.info.Settings {
			settings = append(settings, s.Key+"="+s.Value)
		}
		doc.Packages = append(doc.Packages, spdxPackage{
			Name:             path.Base(spec.Binary),
			SPDXID:           binID,
			VersionInfo:      spec.Version,
			DownloadLocation: "NOASSERTION",
			Checksums:        []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: b.sha256}},
			LicenseConcluded: "NOASSERTION",
			LicenseDeclared:  spec.License,
			CopyrightText:    "NOASSERTION",
			Comment: fmt.Sprintf("%s in the %s image (manifest %s), built from %s with %s -ldflags %q; build settings: %s",
				spec.Binary, b.platform, b.manifest.Digest, b.info.Path, b.info.GoVersion, spec.LDFlags, strings.Join(settings, " ")),
			PrimaryPackagePurpose: "APPLICATION",
		})
		doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", binID})

		main := goModulePackage(debug.Module{Path: b.info.Main.Path, Version: spec.Version}, "the main module, at the version stamped into the binary")
		main.LicenseDeclared = spec.License
		main.DownloadLocation = Source
		doc.Relationships = append(doc.Relationships, spdxRelationship{binID, "GENERATED_FROM", addModule(main)})
		stdlib := goModulePackage(debug.Module{Path: "stdlib", Version: b.info.GoVersion}, "the Go standard library and runtime")
		doc.Relationships = append(doc.Relationships, spdxRelationship{binID, "DEPENDS_ON", addModule(stdlib)})
		for _, dep := range b.info.Deps {
			doc.Relationships = append(doc.Relationships, spdxRelationship{binID, "DEPENDS_ON", addModule(goModulePackage(*dep, ""))})
		}
	}
	ids := make([]string, 0, len(modules))
	for id := range modules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		doc.Packages = append(doc.Packages, modules[id])
	}

	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	doc.DocumentNamespace = fmt.Sprintf("%s/spdx/%s/%s-%x", Source, spec.Name, spec.Tag, sum[:8])
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// goModulePackage is the SPDX package of a Go module; a replaced module is described by its
// replacement (what was compiled), named after the original path.
func goModulePackage(m debug.Module, comment string) spdxPackage {
	version, sum, where := m.Version, m.Sum, ""
	if m.Replace != nil {
		where = fmt.Sprintf("replaced by %s %s", m.Replace.Path, m.Replace.Version)
		if m.Replace.Version != "" && m.Replace.Version != "(devel)" {
			version = m.Replace.Version
		}
		sum = m.Replace.Sum
	}
	p := spdxPackage{
		Name:                  m.Path,
		SPDXID:                spdxID("SPDXRef-Package-go-module-" + m.Path + "-" + version),
		VersionInfo:           version,
		DownloadLocation:      "NOASSERTION",
		LicenseConcluded:      "NOASSERTION",
		LicenseDeclared:       "NOASSERTION",
		CopyrightText:         "NOASSERTION",
		ExternalRefs:          []spdxExternalRef{purlRef(goPurl(m.Path, version))},
		PrimaryPackagePurpose: "LIBRARY",
	}
	notes := []string{}
	if comment != "" {
		notes = append(notes, comment)
	}
	if where != "" {
		notes = append(notes, where)
	}
	if strings.HasPrefix(sum, "h1:") {
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sum, "h1:")); err == nil && len(raw) == sha256.Size {
			p.Checksums = []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(raw)}}
			notes = append(notes, "go.sum "+sum)
		}
	}
	p.Comment = strings.Join(notes, "; ")
	return p
}

// caBundlePackage describes the CA bundle file: its SHA-256, and the module it comes from at
// the version this program was built with. That version is unknown to binaries built
// without module information (test binaries): the checksum still identifies the bundle.
func caBundlePackage(ca []byte) spdxPackage {
	sum := sha256.Sum256(ca)
	p := spdxPackage{
		Name:                  caBundleModule,
		SPDXID:                "SPDXRef-File-ca-bundle",
		DownloadLocation:      "NOASSERTION",
		Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: hex.EncodeToString(sum[:])}},
		LicenseConcluded:      "NOASSERTION",
		LicenseDeclared:       "NOASSERTION",
		CopyrightText:         "NOASSERTION",
		PrimaryPackagePurpose: "FILE",
	}
	from := caBundleModule + " (version unknown: this program has no module information)"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == caBundleModule {
				p.VersionInfo = dep.Version
				p.ExternalRefs = []spdxExternalRef{purlRef(goPurl(dep.Path, dep.Version))}
				from = fmt.Sprintf("%s %s (go.sum %s)", dep.Path, dep.Version, dep.Sum)
			}
		}
	}
	p.Comment = fmt.Sprintf("%s: the unconstrained Mozilla NSS roots of %s; the checksum is the file's", CABundlePath, from)
	return p
}

// goPurl is the package URL of a Go module: pkg:golang/<path>@<version>.
func goPurl(path, version string) string {
	segments := strings.Split(path, "/")
	for i, s := range segments {
		segments[i] = url.PathEscape(s)
	}
	return "pkg:golang/" + strings.Join(segments, "/") + "@" + strings.ReplaceAll(url.PathEscape(version), "+", "%2B")
}

func purlRef(purl string) spdxExternalRef {
	return spdxExternalRef{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: purl}
}

// spdxID turns a name into an SPDX identifier: letters, digits, "." and "-" kept, every
// other character replaced by "-", and a short hash of the name added, so that names
// differing only in replaced characters stay apart.
func spdxID(name string) string {
	sum := sha256.Sum256([]byte(name))
	id := strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, name)
	return id + "-" + hex.EncodeToString(sum[:4])
}
