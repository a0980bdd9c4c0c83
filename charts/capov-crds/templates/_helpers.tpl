{{/*
The conversion webhook of every CAPOV CRD: v1beta2 is stored, v1beta1 is still served, and the
API server converts by calling /convert of the capov release's webhook Service. The capov
chart's preflight refuses to install into another namespace than conversion.webhookNamespace.
*/}}
{{- define "capov-crds.conversion" -}}
conversion:
  strategy: Webhook
  webhook:
    conversionReviewVersions:
      - v1
    clientConfig:
      service:
        namespace: {{ required "conversion.webhookNamespace: set it to the namespace of the capov release" .Values.conversion.webhookNamespace }}
        name: {{ required "conversion.webhookServiceName: set it to the capov webhook Service (capov-webhook-service)" .Values.conversion.webhookServiceName }}
        path: /convert
{{- end }}

{{/* cert-manager's CA injector writes the CA of the webhook's serving certificate into caBundle. */}}
{{- define "capov-crds.caInjection" -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Values.conversion.webhookNamespace .Values.conversion.certificateName }}
{{- end }}
