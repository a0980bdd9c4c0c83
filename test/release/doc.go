// Package release builds CAPOV's release assets (`make release VERSION=vX.Y.Z`, command
// test/release/cmd/release) into out/release/<version>/: the manager, webhook and simulator
// images as OCI archives with their SPDX SBOMs (built by test/images), clusterctl's
// infrastructure-components.yaml with the images pinned by digest, metadata.yaml, the cluster
// templates and ClusterClasses, both Helm charts packaged with the version stamped
// (reproducibly: PackageChart), RELEASE-NOTES.md from the version's CHANGELOG.md section, and
// checksums.txt. The same commit, version and Go toolchain give the same checksums.
//
// Its tests build a release once (images for linux/amd64 only) and check that the assets agree
// with each other and with what `helm package` makes; docs/releasing.md is the maintainers'
// guide.
package release
