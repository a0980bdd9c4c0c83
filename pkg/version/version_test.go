package version

import (
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
)

func TestInfo(t *testing.T) {
	tests := []struct {
		name          string
		info          Info
		wantString    string
		wantUserAgent string
	}{
		{
			name:          "an unstamped build says so",
			info:          Info{GitVersion: "v0.0.0-dev", GitCommit: "unknown", BuildDate: "unknown", GoVersion: "go1.26.0", Platform: "linux/amd64"},
			wantString:    "v0.0.0-dev (commit unknown, built unknown, go1.26.0 linux/amd64)",
			wantUserAgent: "capov-manager/v0.0.0-dev (linux/amd64) capov/unknown",
		},
		{
			name: "a stamped build shows its release and a short commit in the user agent",
			info: Info{GitVersion: "v0.4.0", GitCommit: "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d", BuildDate: "2026-12-01T08:00:00Z",
				GoVersion: "go1.26.0", Platform: "linux/arm64"},
			wantString:    "v0.4.0 (commit 1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d, built 2026-12-01T08:00:00Z, go1.26.0 linux/arm64)",
			wantUserAgent: "capov-manager/v0.4.0 (linux/arm64) capov/1a2b3c4",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(tt.info.String()).To(Equal(tt.wantString))
			g.Expect(tt.info.UserAgent("capov-manager")).To(Equal(tt.wantUserAgent))
		})
	}
}

func TestGetReportsTheLinkerStampedValues(t *testing.T) {
	// `go test` stamps nothing: the defaults are what an unstamped binary reports.
	g := NewWithT(t)
	i := Get()
	g.Expect(i.GitVersion).To(Equal("v0.0.0-dev"))
	g.Expect(i.GitCommit).To(Equal("unknown"))
	g.Expect(i.BuildDate).To(Equal("unknown"))
	g.Expect(i.GoVersion).To(Equal(runtime.Version()))
	g.Expect(i.Platform).To(Equal(runtime.GOOS + "/" + runtime.GOARCH))
}
