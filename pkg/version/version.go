// Package version holds the version, git commit and build date of the CAPOV binaries. They are
// stamped at build time (`make build`, the Dockerfiles) with
//
//	-ldflags "-X github.com/capov/capov/pkg/version.gitVersion=v0.4.0
//	          -X github.com/capov/capov/pkg/version.gitCommit=<sha>
//	          -X github.com/capov/capov/pkg/version.buildDate=<RFC 3339 UTC>"
//
// A plain `go build` or `go run` leaves the defaults below.
package version

import (
	"fmt"
	"runtime"
)

// Set by the linker (-X); these are the only package-level variables of CAPOV, and nothing
// assigns them at run time.
var (
	gitVersion = "v0.0.0-dev"
	gitCommit  = "unknown"
	buildDate  = "unknown"
)

// Info describes the running binary.
type Info struct {
	// GitVersion is the release (git describe), e.g. v0.4.0 or v0.4.0-3-g1a2b3c4-dirty.
	GitVersion string `json:"gitVersion"`
	// GitCommit is the full commit hash the binary was built from.
	GitCommit string `json:"gitCommit"`
	// BuildDate is when the binary was built, RFC 3339 in UTC.
	BuildDate string `json:"buildDate"`
	// GoVersion and Platform describe the toolchain and the target.
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the stamped version information.
func Get() Info {
	return Info{
		GitVersion: gitVersion,
		GitCommit:  gitCommit,
		BuildDate:  buildDate,
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String is the one-line form --version prints after the program name.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s %s)", i.GitVersion, i.GitCommit, i.BuildDate, i.GoVersion, i.Platform)
}

// UserAgent is the HTTP User-Agent of a CAPOV component, in the shape of client-go's default
// ("<program>/<version> (<os>/<arch>) kubernetes/<commit>"):
// "capov-manager/v0.4.0 (linux/amd64) capov/1a2b3c4".
func (i Info) UserAgent(component string) string {
	return fmt.Sprintf("%s/%s (%s) capov/%s", component, i.GitVersion, i.Platform, shortCommit(i.GitCommit))
}

// shortCommit keeps seven hex digits, like `git log --oneline` and client-go's user agent.
func shortCommit(c string) string {
	if len(c) > 7 {
		return c[:7]
	}
	return c
}
