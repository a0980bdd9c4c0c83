{{/*
Object names are fixed (not prefixed with the release name): the product documentation and
runbooks address them directly, e.g. deployment/capov-controller-manager. One release per
cluster, in the operator namespace (capov-system).
*/}}

{{/*
Labels of every object of the release. Argument: (dict "ctx" $ "component" "<name>").
*/}}
{{- define "capov.labels" -}}
{{- $ctx := .ctx -}}
app.kubernetes.io/name: capov
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
app.kubernetes.io/part-of: capov
helm.sh/chart: {{ printf "%s-%s" $ctx.Chart.Name $ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
cluster.x-k8s.io/provider: infrastructure-ovirt
{{- with $ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector of the manager pods; control-plane: controller-manager is the documented label. */}}
{{- define "capov.manager.selectorLabels" -}}
app.kubernetes.io/name: capov
app.kubernetes.io/component: manager
control-plane: controller-manager
{{- end }}

{{/* Selector of the webhook pods. */}}
{{- define "capov.webhook.selectorLabels" -}}
app.kubernetes.io/name: capov
app.kubernetes.io/component: webhook
{{- end }}

{{/* Image tag of the manager: manager.tag, else the chart's appVersion. */}}
{{- define "capov.manager.tag" -}}
{{- .Values.manager.tag | default .Chart.AppVersion -}}
{{- end }}

{{/* Image of a component: <repository>:<tag>, or <repository> alone when it has a digest. */}}
{{- define "capov.image" -}}
{{- $repo := index . 0 -}}
{{- $tag := index . 1 -}}
{{- if contains "@" $repo -}}
{{- $repo -}}
{{- else -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}
{{- end }}

{{/*
The --feature-gates value: key=value pairs in key order (range over a map is sorted). Unknown
keys and invalid values are passed on for the binaries to ignore and name in a warning (product
doc §6); a "," or "=" inside a key or value becomes "_", so that it can never set another gate.
*/}}
{{- define "capov.featureGates" -}}
{{- $gates := list -}}
{{- range $name, $value := .Values.featureGates -}}
{{- $key := $name | replace "," "_" | replace "=" "_" -}}
{{- $val := printf "%v" $value | replace "," "_" | replace "=" "_" -}}
{{- $gates = append $gates (printf "%s=%s" $key $val) -}}
{{- end -}}
{{- join "," $gates -}}
{{- end }}

{{/* Name of the cert-manager Certificate of the webhook, as namespace/name for CA injection. */}}
{{- define "capov.certificateRef" -}}
{{- printf "%s/capov-serving-cert" .Release.Namespace -}}
{{- end }}

{{/*
Whether cert-manager provides the certificates (certificates.source certManager): "true" or "".
With source secret the chart renders no cert-manager object and the CA comes from
certificates.caBundle.
*/}}
{{- define "capov.certManager" -}}
{{- if ne .Values.certificates.source "secret" -}}
true
{{- end -}}
{{- end }}

{{/* Secret of the webhook serving certificate, mounted at --cert-dir. */}}
{{- define "capov.webhookCertSecret" -}}
{{- .Values.certificates.secretName -}}
{{- end }}

{{/*
caBundle of the webhook configurations with certificates.source secret: certificates.caBundle
without whitespace (so wrapped base64 output works), failing with instructions when it is empty
or not base64 of a PEM certificate.
*/}}
{{- define "capov.caBundle" -}}
{{- $where := printf "Secret %s/%s" .Release.Namespace (include "capov.webhookCertSecret" .) -}}
{{- $b := .Values.certificates.caBundle | default "" | nospace -}}
{{- if not $b -}}
{{- fail (printf "\n\ncertificates.source is secret, so cert-manager does not inject the webhook's CA: set certificates.caBundle to the base64-encoded PEM of the CA certificate(s) that signed tls.crt of %s (base64 -w0 ca.crt), and set the same value as conversion.caBundle of the capov-crds chart (Shturval: customvalues of shturval-capov and shturval-capov-crds)." $where) -}}
{{- end -}}
{{- if not (contains "-----BEGIN CERTIFICATE-----" (b64dec $b)) -}}
{{- fail (printf "\n\ncertificates.caBundle must be base64 of PEM CA certificates (-----BEGIN CERTIFICATE-----), like base64 -w0 ca.crt prints; the CA must have signed tls.crt of %s." $where) -}}
{{- end -}}
{{- $b -}}
{{- end }}

{{/* Environment shared by both containers. */}}
{{- define "capov.podEnv" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}

{{/* Admission rule for one plural resource of our group (argument: the plural). */}}
{{- define "capov.webhookRule" -}}
rules:
  - apiGroups:
      - infrastructure.cluster.x-k8s.io
    apiVersions:
      - v1beta2
    operations:
      - CREATE
      - UPDATE
    resources:
      - {{ . }}
{{- end }}

{{/* Where both binaries read the metrics serving certificate (metrics.certificate.enabled). */}}
{{- define "capov.metricsCertDir" -}}
/tmp/k8s-metrics-server/metrics-certs
{{- end }}

{{/* Secret of the metrics serving certificate (metrics.certificate.secretName). */}}
{{- define "capov.metricsCertSecret" -}}
{{- .Values.metrics.certificate.secretName -}}
{{- end }}

{{/* issuerRef of the chart's certificates: certManager.issuerRef, else the self-signed Issuer. */}}
{{- define "capov.issuerRef" -}}
{{- if .Values.certManager.issuerRef -}}
{{- toYaml .Values.certManager.issuerRef -}}
{{- else -}}
kind: Issuer
name: capov-selfsigned-issuer
{{- end -}}
{{- end }}

{{/*
Whether the ServiceMonitors are rendered: the value, and the Prometheus Operator API served
(offline rendering needs --api-versions monitoring.coreos.com/v1/ServiceMonitor). Returns
"true" or "".
*/}}
{{- define "capov.serviceMonitors" -}}
{{- if and .Values.metrics.serviceMonitor.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") -}}
true
{{- end -}}
{{- end }}

{{/*
The scrape endpoint of a metrics Service. Arguments: (dict "ctx" $ "service" "<name>").
Bearer token from a Secret (authorization) unless the deprecated bearerTokenFile is set; TLS
verified against the metrics certificate's CA when metrics.certificate.enabled.
*/}}
{{- define "capov.scrapeEndpoint" -}}
{{- $ctx := .ctx -}}
{{- $sm := $ctx.Values.metrics.serviceMonitor -}}
- port: https
  path: /metrics
  scheme: https
  interval: {{ $sm.interval }}
  scrapeTimeout: {{ $sm.scrapeTimeout }}
  {{- if $sm.bearerTokenFile }}
  bearerTokenFile: {{ $sm.bearerTokenFile }}
  {{- else }}
  authorization:
    type: Bearer
    credentials:
      {{- if $sm.authorization.credentials }}
      {{- toYaml $sm.authorization.credentials | nindent 6 }}
      {{- else }}
      name: capov-metrics-scraper-token
      key: token
      {{- end }}
  {{- end }}
  {{- if $ctx.Values.metrics.certificate.enabled }}
  tlsConfig:
    ca:
      secret:
        name: {{ include "capov.metricsCertSecret" $ctx }}
        key: ca.crt
    serverName: {{ printf "%s.%s.svc" .service $ctx.Release.Namespace }}
  {{- else }}
  {{- with $sm.tlsConfig }}
  tlsConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- end }}
  {{- with $sm.relabelings }}
  relabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $sm.metricRelabelings }}
  metricRelabelings:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $sm.endpointAdditionalProperties }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}

{{/*
Volume and mount of the metrics certificate (metrics.certificate.enabled): 0440, readable
through the pod's fsGroup (podSecurityContext).
*/}}
{{- define "capov.metricsCertVolume" -}}
- name: metrics-cert
  secret:
    secretName: {{ include "capov.metricsCertSecret" . }}
    defaultMode: 0440
{{- end }}
{{- define "capov.metricsCertMount" -}}
- name: metrics-cert
  mountPath: {{ include "capov.metricsCertDir" . }}
  readOnly: true
{{- end }}
