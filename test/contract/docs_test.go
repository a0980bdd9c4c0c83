package contract_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"

	"github.com/capov/capov/pkg/app/manager"
	"github.com/capov/capov/pkg/app/webhook"
)

// TestEveryFlagIsDocumented keeps docs/operations.md and docs/webhook.md true: every flag of
// both binaries appears there.
func TestEveryFlagIsDocumented(t *testing.T) {
	for _, tc := range []struct {
		doc   string
		flags func(*pflag.FlagSet)
	}{
		{"operations.md", manager.NewOptions().AddFlags},
		{"webhook.md", webhook.NewOptions().AddFlags},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			g := NewWithT(t)
			b, err := os.ReadFile(filepath.Join("..", "..", "docs", tc.doc))
			g.Expect(err).NotTo(HaveOccurred())
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			tc.flags(fs)
			fs.VisitAll(func(f *pflag.Flag) {
				g.Expect(string(b)).To(ContainSubstring("--"+f.Name), "flag --%s is not documented in docs/%s", f.Name, tc.doc)
			})
		})
	}
}

// TestEveryMakeTargetIsDocumented keeps the README's make target table true.
func TestEveryMakeTargetIsDocumented(t *testing.T) {
	g := NewWithT(t)
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(mk), "\n") {
		if !strings.Contains(line, "## ") || strings.HasPrefix(line, "##") || strings.HasPrefix(line, "\t") {
			continue
		}
		target := strings.TrimSpace(strings.SplitN(line, ":", 2)[0])
		if target == "help" {
			continue
		}
		g.Expect(string(readme)).To(ContainSubstring("make "+target), "make %s is not in the README", target)
	}
}
