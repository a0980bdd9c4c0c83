package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/test/envtest"
)

// productDocMachine is the OVirtMachine example of product doc §7.3 as printed, with its two
// misspellings: "vmtype:server" (no space) and "CPU:" (the CRD field is cpu).
const productDocMachine = `apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: OVirtMachine
metadata:
  name: worker-abc123
  namespace: default
spec:
  provider: ovirt-prod # name OVirtProvider
  ovirtcluster: "Default" # cluster name in oVirt (Default - standard)
  template: "rhcos-4.14" # VM template in oVirt
  # storagedomainname: "my-datastore" # optional: different storage domain for disks than the template
  # diskclone: true                    # optional: true or false; empty field uses the disk-clone feature gate
  vmtype:server
  CPU:
    sockets: 1
    cores: 4
    threads: 1
  memory:
    sizemb: 8192
    guaranteedmb: 4096
  osdisksizegb: 80
  nics:
    - vnicprofile: "ovirtmgmt" # vNIC Profile name in oVirt
`

// TestProductDocSpellingsAsDocumented applies the product doc's example with kubectl (server
// dry-run against the suite's API server, which has the real CRDs) and checks that
// docs/operations.md quotes what kubectl answers to each spelling, and that the corrected
// manifest is accepted.
func TestProductDocSpellingsAsDocumented(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	g := NewWithT(t)
	root, err := envtest.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	g.Expect(err).NotTo(HaveOccurred())

	spaced := strings.Replace(productDocMachine, "vmtype:server", "vmtype: server", 1)
	fixed := strings.Replace(spaced, "  CPU:", "  cpu:", 1)
	tests := []struct {
		name     string
		manifest string
		args     []string
		wantOK   bool
		want     string // in kubectl's output and quoted in docs/operations.md
		notWant  string // not in kubectl's output
	}{
		{"vmtype:server without a space is not YAML kubectl can read", productDocMachine, nil, false,
			"error converting YAML to JSON: yaml: line 13: could not find expected ':'", ""},
		{"CPU is an unknown field under strict field validation (kubectl's default)", spaced, nil, false,
			`strict decoding error: unknown field "spec.CPU"`, ""},
		{"CPU is dropped with a warning under --validate=warn", spaced, []string{"--validate=warn"}, true,
			`Warning: unknown field "spec.CPU"`, ""},
		{"CPU is dropped silently under --validate=false", spaced, []string{"--validate=false"}, true,
			"ovirtmachine.infrastructure.cluster.x-k8s.io/worker-abc123 created", "Warning"},
		{"the corrected manifest is accepted", fixed, nil, true, "ovirtmachine.infrastructure.cluster.x-k8s.io/worker-abc123 created", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			path := filepath.Join(t.TempDir(), "worker.yaml")
			g.Expect(os.WriteFile(path, []byte(tt.manifest), 0o600)).To(Succeed())
			args := append([]string{"--kubeconfig=" + kubeconfigPath, "apply", "--dry-run=server", "-f", path}, tt.args...)
			var out bytes.Buffer
			cmd := exec.Command(kubectl, args...)
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			t.Logf("kubectl %s:\n%s", strings.Join(args[1:], " "), out.String())
			if tt.wantOK {
				g.Expect(err).NotTo(HaveOccurred(), out.String())
			} else {
				g.Expect(err).To(HaveOccurred(), out.String())
			}
			g.Expect(out.String()).To(ContainSubstring(tt.want))
			if tt.notWant != "" {
				g.Expect(out.String()).NotTo(ContainSubstring(tt.notWant))
			}
			g.Expect(string(doc)).To(ContainSubstring(tt.want), "docs/operations.md quotes kubectl's answer")
		})
	}
}
