package clusterctl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/capov/capov/test/certmanager"
	"github.com/capov/capov/test/envtest"
)

// CertManagerCRDFiles returns cert-manager's CRD files from its Go module (deploy/crds), sorted.
func CertManagerCRDFiles(ctx context.Context) ([]string, error) {
	dir, err := envtest.ModuleDir(ctx, certmanager.Module)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "deploy", "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s/deploy/crds", dir)
	}
	slices.Sort(files)
	return files, nil
}

// CertManagerManifest returns what clusterctl installs as cert-manager (its cert-manager.yaml): the
// namespace, cert-manager's own CRDs, and the stand-in's ServiceAccount, RBAC and Deployment
// running image. Nothing in it admits or converts: the stand-in has no webhook.
func CertManagerManifest(ctx context.Context, image string) ([]byte, error) {
	files, err := CertManagerCRDFiles(ctx)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, namespaceYAML, certmanager.Namespace)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(bytes.TrimPrefix(bytes.TrimSpace(raw), []byte("---\n")))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, controllerYAML, certmanager.Namespace, certmanager.Namespace, certmanager.DeploymentName, certmanager.Namespace, image)
	return b.Bytes(), nil
}

const namespaceYAML = `apiVersion: v1
kind: Namespace
metadata:
  name: %s
`

// controllerYAML: the stand-in's identity and Deployment. Its RBAC is what it reads and writes:
// Certificates and Issuers (status too), Secrets, and the objects it injects CA bundles into.
const controllerYAML = `---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cert-manager
  namespace: %s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cert-manager-stand-in
rules:
- apiGroups: ["cert-manager.io"]
  resources: ["certificates", "certificates/status", "issuers", "issuers/status", "clusterissuers", "clusterissuers/status"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["admissionregistration.k8s.io"]
  resources: ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["apiregistration.k8s.io"]
  resources: ["apiservices"]
  verbs: ["get", "list", "watch", "update", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cert-manager-stand-in
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cert-manager-stand-in
subjects:
- kind: ServiceAccount
  name: cert-manager
  namespace: %s
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
  namespace: %s
  labels:
    app.kubernetes.io/name: cert-manager
    app.kubernetes.io/component: controller
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: cert-manager
      app.kubernetes.io/component: controller
  template:
    metadata:
      labels:
        app.kubernetes.io/name: cert-manager
        app.kubernetes.io/component: controller
    spec:
      serviceAccountName: cert-manager
      securityContext:
        runAsNonRoot: true
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: cert-manager-controller
        image: %s
        args:
        - --cluster-resource-namespace=$(POD_NAMESPACE)
        env:
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: ["ALL"]
`
