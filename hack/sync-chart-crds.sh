#!/usr/bin/env bash
# sync-chart-crds.sh: copies the generated CRDs into the capov-crds chart, adding the Helm
# resource policy "keep" so that uninstalling the chart never deletes the CRDs (and with them
# every OVirt* object).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=config/crd/bases
dst=charts/capov-crds/templates
[[ -d charts/capov-crds ]] || exit 0
mkdir -p "${dst}"
rm -f "${dst}"/infrastructure.cluster.x-k8s.io_*.yaml
for f in "${src}"/*.yaml; do
  awk '
    /^  annotations:$/ && !done { print; print "    helm.sh/resource-policy: keep"; done=1; next }
    { print }
  ' "${f}" >"${dst}/$(basename "${f}")"
done
