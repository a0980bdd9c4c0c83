{{/*
The conversion webhook of every CAPOV CRD: v1beta2 is stored, v1beta1 is still served, and the
API server converts by calling /convert of the capov release's webhook Service. The capov
chart's preflight refuses to install into another namespace than conversion.webhookNamespace.
The CA the API server trusts comes from cert-manager's CA injector (conversion.certificateName),
or, when conversion.caBundle is set (capov chart with certificates.source secret), from it.
*/}}
{{- define "capov-crds.conversion" -}}
conversion:
  strategy: Webhook
  webhook:
    conversionReviewVersions:
      - v1
    clientConfig:
      {{- with include "capov-crds.caBundle" . }}
      caBundle: {{ . }}
      {{- end }}
      service:
        namespace: {{ required "conversion.webhookNamespace: set it to the namespace of the capov release" .Values.conversion.webhookNamespace }}
        name: {{ required "conversion.webhookServiceName: set it to the capov webhook Service (capov-webhook-service)" .Values.conversion.webhookServiceName }}
        path: /convert
{{- end }}

{{/*
conversion.caBundle without whitespace (wrapped base64 output works), failing with instructions
when it is not base64 of a PEM certificate; empty when unset.
*/}}
{{- define "capov-crds.caBundle" -}}
{{- $b := .Values.conversion.caBundle | default "" | nospace -}}
{{- if and $b (not (contains "-----BEGIN CERTIFICATE-----" (b64dec $b))) -}}
{{- fail "\n\nconversion.caBundle must be base64 of PEM CA certificates (-----BEGIN CERTIFICATE-----), like base64 -w0 ca.crt prints: the same value as certificates.caBundle of the capov chart." -}}
{{- end -}}
{{- $b -}}
{{- end }}

{{/*
cert-manager's CA injector writes the CA of the webhook's serving certificate into caBundle;
nothing when conversion.caBundle is set (the injector would overwrite it).
*/}}
{{- define "capov-crds.caInjection" -}}
{{- if not (include "capov-crds.caBundle" .) -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Values.conversion.webhookNamespace .Values.conversion.certificateName }}
{{- end -}}
{{- end }}
