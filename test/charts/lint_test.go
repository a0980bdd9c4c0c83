package charts

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// TestHelmLintStrict lints both charts with the helm CLI built from the pinned module (see
// hack/helm.sh): warnings fail too. Lint renders with helm's fake capabilities, where the
// preflight's `fail` only logs (lint mode), so the shipped defaults are linted as they are.
func TestHelmLintStrict(t *testing.T) {
	helm := tool(t, "HELM", "helm.sh")
	for _, name := range []string{"capov-crds", "capov"} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			out, err := run(t, nil, helm, "lint", "--strict", filepath.Join(root, "charts", name))
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("1 chart(s) linted, 0 chart(s) failed"))
		})
	}
}

// TestHelmTemplateOfflineAsDocumented checks the offline rendering commands of docs/helm.md.
func TestHelmTemplateOfflineAsDocumented(t *testing.T) {
	helm := tool(t, "HELM", "helm.sh")
	chart := filepath.Join(root, "charts", "capov")

	t.Run("without the API list the preflight explains what to do", func(t *testing.T) {
		g := NewWithT(t)
		out, err := run(t, nil, helm, "template", mainRelease, chart, "-n", namespace)
		g.Expect(err).To(HaveOccurred())
		g.Expect(out).To(ContainSubstring("switch shturval-capov-crds to auto"))
		g.Expect(out).To(ContainSubstring("--api-versions infrastructure.cluster.x-k8s.io/v1beta2/OVirtMachine"))
	})
	t.Run("with --api-versions", func(t *testing.T) {
		g := NewWithT(t)
		out, err := run(t, nil, helm, "template", mainRelease, chart, "-n", namespace,
			"--api-versions", apiOVirtMachine, "--api-versions", apiCertificate, "--api-versions", apiServiceMonitor)
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("name: capov-metrics-monitor"))
		g.Expect(out).To(ContainSubstring(defaultGates))
	})
	t.Run("with preflight.enabled=false", func(t *testing.T) {
		g := NewWithT(t)
		out, err := run(t, nil, helm, "template", mainRelease, chart, "-n", namespace, "--set", "preflight.enabled=false")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("name: capov-controller-manager"))
	})
	t.Run("a typo in a gate value and an unknown gate are passed on for the binaries to ignore", func(t *testing.T) {
		g := NewWithT(t)
		out, err := run(t, nil, helm, "template", mainRelease, chart, "--set", "preflight.enabled=false",
			"--set", "featureGates.disk-clone=ture", "--set", "featureGates.disk-magic=true")
		g.Expect(err).NotTo(HaveOccurred(), out)
		g.Expect(out).To(ContainSubstring("--feature-gates=disk-add-vm-name=false,disk-clone=ture,disk-keep-template-name=true,disk-magic=true"))
	})
}
