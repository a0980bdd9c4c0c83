// Command multiarch is the small program the images tests build for every platform: the
// assembly of a multi-platform index (one image and one SBOM artifact per platform) is tested
// with it, so that `make test` does not compile the manager's dependencies for arm64 too.
// `make images` builds the product images for every platform.
package main

import (
	"fmt"

	"github.com/capov/capov/pkg/version"
)

func main() { fmt.Println(version.Get().String()) }
