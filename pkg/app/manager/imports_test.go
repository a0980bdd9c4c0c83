package manager

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// deprecatedCAPI is the tree of Cluster API's v1beta1-contract helpers (conditions, patch,
// paused), removed with CAPI v1.16. The manager uses the stage-2 helpers instead
// (util/conditions, util/conditions/deprecated/v1beta1, util/patch, util/paused): mixing both
// patch helpers drops conditions.
const deprecatedCAPI = "sigs.k8s.io/cluster-api/util/deprecated/v1beta1"

// TestTheManagerBinaryDoesNotLinkDeprecatedCAPIHelpers fails when any package linked into
// cmd/manager, ours or a dependency, is under util/deprecated/v1beta1.
func TestTheManagerBinaryDoesNotLinkDeprecatedCAPIHelpers(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", "github.com/capov/capov/cmd/manager").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "go list: %s", out)
	deps := strings.Fields(string(out))
	g.Expect(deps).To(ContainElement("github.com/capov/capov/pkg/controllers"), "the listing is the manager's")
	for _, d := range deps {
		g.Expect(d == deprecatedCAPI || strings.HasPrefix(d, deprecatedCAPI+"/")).To(BeFalse(), "cmd/manager links %s", d)
	}
}

// TestNoSourceUnderPkgOrCmdImportsDeprecatedCAPIHelpers fails when a file under pkg/ or cmd/
// (tests included) imports a package under util/deprecated/v1beta1. It reads the imports
// without compiling, so it holds for packages that are not linked into the manager.
func TestNoSourceUnderPkgOrCmdImportsDeprecatedCAPIHelpers(t *testing.T) {
	g := NewWithT(t)
	root := filepath.Join("..", "..", "..")
	files := 0
	for _, dir := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			files++
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				g.Expect(p == deprecatedCAPI || strings.HasPrefix(p, deprecatedCAPI+"/")).To(BeFalse(), "%s imports %s", path, p)
			}
			return nil
		})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(files).To(BeNumerically(">", 50), "the walk found the sources")
}
