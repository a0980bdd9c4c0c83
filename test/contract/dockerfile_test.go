package contract_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestDockerfilesAreMultiStageStaticAndNonRoot lints the Dockerfiles (no Docker engine runs
// here): a build stage and a runtime stage, the binary built like `make build` (static, trimmed,
// stripped), a distroless non-root runtime, and the entrypoint the charts run.
func TestDockerfilesAreMultiStageStaticAndNonRoot(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	build := regexp.MustCompile(`(?m)^BUILD := (.*)$`).FindSubmatch(makefile)
	if build == nil {
		t.Fatal("Makefile has no BUILD line")
	}
	ldflags := regexp.MustCompile(`(?m)^LDFLAGS := (.*)$`).FindSubmatch(makefile)
	for _, bin := range []string{"manager", "webhook"} {
		t.Run(bin, func(t *testing.T) {
			g := NewWithT(t)
			b, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile."+bin))
			g.Expect(err).NotTo(HaveOccurred())
			df := string(b)
			var froms []string
			var lastUser, entrypoint string
			for _, line := range strings.Split(df, "\n") {
				f := strings.Fields(line)
				if len(f) == 0 || strings.HasPrefix(f[0], "#") {
					continue
				}
				switch strings.ToUpper(f[0]) {
				case "FROM":
					froms = append(froms, strings.Join(f[1:], " "))
					lastUser = ""
				case "USER":
					lastUser = f[1]
				case "ENTRYPOINT":
					entrypoint = strings.Join(f[1:], " ")
				}
			}
			g.Expect(len(froms)).To(BeNumerically(">=", 2), "multi-stage")
			g.Expect(froms[len(froms)-1]).To(ContainSubstring("distroless/static"))
			g.Expect(froms[len(froms)-1]).To(ContainSubstring("nonroot"))
			g.Expect(lastUser).To(Equal("65532:65532"), "the runtime stage runs as non-root")
			g.Expect(entrypoint).To(Equal(`["/` + bin + `"]`))
			g.Expect(df).To(ContainSubstring("CGO_ENABLED=0"))
			g.Expect(string(build[1])).To(ContainSubstring("go build -trimpath"))
			g.Expect(df).To(ContainSubstring(`go build -trimpath -ldflags "` + string(ldflags[1]) + `" -o /out/` + bin + " ./cmd/" + bin))
			// The version stamps are build args of the build stage, with defaults, and the
			// ldflags stamp them into pkg/version.
			buildStage := df[strings.Index(df, "AS build"):strings.LastIndex(df, "FROM ")]
			for _, arg := range []string{"VERSION", "GIT_COMMIT", "BUILD_DATE"} {
				g.Expect(buildStage).To(MatchRegexp(`(?m)^ARG `+arg+`=\S+$`), "build arg %s with a default", arg)
			}
			for _, stamp := range []string{"gitVersion=${VERSION}", "gitCommit=${GIT_COMMIT}", "buildDate=${BUILD_DATE}"} {
				g.Expect(string(ldflags[1])).To(ContainSubstring("-X github.com/capov/capov/pkg/version." + stamp))
			}
		})
	}
}

// TestMakeBuildStampsTheVersion runs `make build` with the version variables set and asks
// both binaries for --version.
func TestMakeBuildStampsTheVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries")
	}
	g := NewWithT(t)
	dir := t.TempDir()
	cmd := exec.CommandContext(context.Background(), "make", "-C", filepath.Join("..", ".."), "build", "BIN="+dir,
		"VERSION=v9.8.7-test", "GIT_COMMIT=0123456789abcdef0123456789abcdef01234567", "BUILD_DATE=2026-12-01T09:00:00Z")
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	for _, bin := range []string{"manager", "webhook"} {
		out, err := exec.CommandContext(context.Background(), filepath.Join(dir, bin), "--version").CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		g.Expect(string(out)).To(HavePrefix(bin + " v9.8.7-test (commit 0123456789abcdef0123456789abcdef01234567, built 2026-12-01T09:00:00Z, go"))
	}
}
