#!/usr/bin/env bash
# sync-chart-crds.sh: copies the generated CRDs into the capov-crds chart, adding
#   - the Helm resource policy "keep", so that uninstalling the chart never deletes the CRDs
#     (and with them every OVirt* object);
#   - the cert-manager CA injection annotation and spec.conversion, templated from the chart's
#     conversion.* values (templates/_helpers.tpl): the API server converts between v1beta1
#     and v1beta2 by calling /convert of the capov release's webhook Service.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=config/crd/bases
dst=charts/capov-crds/templates
[[ -d charts/capov-crds ]] || exit 0
mkdir -p "${dst}"
rm -f "${dst}"/infrastructure.cluster.x-k8s.io_*.yaml
for f in "${src}"/*.yaml; do
  if grep -q '{{' "${f}"; then
    echo "sync-chart-crds: ${f} contains '{{', which Helm would template" >&2
    exit 1
  fi
  awk '
    /^  annotations:$/ && !ann { print; print "    helm.sh/resource-policy: keep"; print "    {{- include \"capov-crds.caInjection\" . | nindent 4 }}"; ann=1; next }
    /^spec:$/ && !spec { print; print "  {{- include \"capov-crds.conversion\" . | nindent 2 }}"; spec=1; next }
    { print }
  ' "${f}" >"${dst}/$(basename "${f}")"
done
