package webhook

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestATypeErrorInAManifestIsInvalidNotAnInternalError: `kubectl apply` of a product-doc
// manifest with a value of the wrong type (`diskclone: "Yes"`, `osdisksizegb: "80"`) must answer
// as any invalid manifest does: 422 Invalid, naming the field as the manifest spells it and what
// it accepts. Before, the API server sent the object to the conversion webhook first (the
// admission webhooks are registered for v1beta2), whose typed decoding failed, and kubectl
// printed `Error from server (InternalError): ... conversion webhook ... failed: json: cannot
// unmarshal string into Go struct field ...` (issue 33, item 10). Every kind, both versions.
func TestATypeErrorInAManifestIsInvalidNotAnInternalError(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	kc, err := suite.env.Kubeconfig("webhook-suite")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	NewWithT(t).Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())

	machine := func(version, field string) string {
		return `apiVersion: infrastructure.cluster.x-k8s.io/` + version + `
kind: OVirtMachine
metadata:
  name: worker-typed
  namespace: default
spec:
  provider: ovirt-prod
  ovirtcluster: Default
  template: rhcos-4.14
  ` + field + "\n"
	}
	tests := []struct {
		name, manifest, want string
	}{
		{"v1beta1 diskclone: \"Yes\"", machine("v1beta1", `diskclone: "Yes"`), `spec.diskclone: Invalid value: "string": spec.diskclone in body must be of type boolean: "string"`},
		{"v1beta1 osdisksizegb: \"80\"", machine("v1beta1", `osdisksizegb: "80"`), `spec.osdisksizegb: Invalid value: "string": spec.osdisksizegb in body must be of type integer: "string"`},
		{"v1beta2 diskclone: \"Yes\"", machine("v1beta2", `diskclone: "Yes"`), `spec.diskclone: Invalid value: "string": spec.diskclone in body must be of type boolean: "string"`},
		{"v1beta1 cpu.cores: \"4\"", machine("v1beta1", "cpu: {sockets: 1, cores: \"4\", threads: 1}"), `spec.cpu.cores: Invalid value: "string": spec.cpu.cores in body must be of type integer: "string"`},
		{"v1beta1 template diskclone: \"Yes\"", `apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OVirtMachineTemplate
metadata:
  name: workers-typed
  namespace: default
spec:
  template:
    spec:
      provider: ovirt-prod
      ovirtcluster: Default
      template: rhcos-4.14
      diskclone: "Yes"
`, `spec.template.spec.diskclone: Invalid value: "string": spec.template.spec.diskclone in body must be of type boolean: "string"`},
		{"v1beta1 provider tls.insecure: \"yes\"", `apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OVirtProvider
metadata:
  name: ovirt-typed
spec:
  engine: https://ovirt.example.com/ovirt-engine/api
  credentialsSecretName: ovirt-typed
  tls: {insecure: "yes"}
`, `spec.tls.insecure: Invalid value: "string": spec.tls.insecure in body must be of type boolean: "string"`},
		{"v1beta1 cluster port: \"6443\"", `apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OVirtCluster
metadata:
  name: cluster-typed
  namespace: default
spec:
  controlPlaneEndpoint: {host: 10.0.0.10, port: "6443"}
`, `spec.controlPlaneEndpoint.port: Invalid value: "string": spec.controlPlaneEndpoint.port in body must be of type integer: "string"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "manifest.yaml")
			g.Expect(os.WriteFile(path, []byte(tt.manifest), 0o600)).To(Succeed())
			var out bytes.Buffer
			cmd := exec.CommandContext(context.Background(), kubectl, "--kubeconfig="+kubeconfig, "apply", "--dry-run=server", "-f", path)
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			t.Logf("kubectl apply:\n%s", out.String())
			g.Expect(err).To(HaveOccurred())
			g.Expect(out.String()).To(ContainSubstring("is invalid"))
			g.Expect(out.String()).NotTo(Or(ContainSubstring("InternalError"), ContainSubstring("cannot unmarshal")))
			g.Expect(strings.ReplaceAll(out.String(), "\n", " ")).To(ContainSubstring(tt.want))
		})
	}
}
