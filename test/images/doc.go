// Package images assembles CAPOV's OCI images from static Go binaries, without Docker or a
// registry: `make images` (test/images/cmd/images) builds capov-manager, capov-webhook and
// capov-ovirtsim, and end-to-end tests build their own images (the Cluster API core manager,
// a pause program) through Build and WriteOCIArchive.
//
// Every image is an OCI image index with one image per platform (linux/amd64 and linux/arm64
// by default). Each platform image has two layers: the file system of
// gcr.io/distroless/static-debian12:nonroot that a static Go binary needs (users and groups,
// /home/nonroot, /tmp, nsswitch.conf, a CA bundle from golang.org/x/crypto/x509roots/fallback)
// and the binary, built as Dockerfile.manager and Dockerfile.webhook build theirs. The image
// config is the Dockerfiles': USER 65532:65532, ENTRYPOINT the binary, distroless's
// environment and working directory, OCI labels. The test of this package keeps the images and
// the Dockerfiles in agreement.
//
// Everything is reproducible: the same sources, Go toolchain and version stamps give the same
// digests (fixed mtimes, sorted entries, no clock). An SPDX 2.3 SBOM of each image's Go modules
// (from the binaries' build information) is written next to the archive and attached to every
// platform image as an OCI 1.1 artifact listed in the image index. docs/images.md is the user
// documentation.
package images
