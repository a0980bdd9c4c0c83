package ovirtsim

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits the engine enforces (docs/ovirtsim.md, section Fidelity).
const (
	// defaultMaxVMNameLength is the engine's MaxVmNameLength config default
	// (packaging/dbscripts/upgrade/pre_upgrade/0000_config.sql).
	defaultMaxVMNameLength = 64
	// maxDescriptionLength is VmBase.description's @Size(max = 255).
	maxDescriptionLength = 255
	// maxCorrelationIDLength is the correlation id's @Size(max = 50).
	maxCorrelationIDLength = 50
	// defaultVersion is the engine version GET /api reports by default.
	defaultVersion = "4.5.5"

	nameTooLongWhy        = "The given name is too long."
	descriptionTooLongWhy = "The given description is too long."
	corrTooLongDetail     = "[Invalid correlation ID: it is longer than 50 characters.]"
	corrBadCharsDetail    = "[Invalid correlation ID: only alphanumeric characters, '-' and '_' are allowed.]"
)

// engineVersion is a parsed "major.minor[.build]".
type engineVersion struct {
	major, minor, build int
}

func parseVersion(s string) (engineVersion, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return engineVersion{}, invalidf("engine version %q: want major.minor[.build]", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return engineVersion{}, fmt.Errorf("%w: engine version %q: %q is not a number", ErrInvalid, s, p)
		}
		n[i] = v
	}
	if n[0] != 4 {
		return engineVersion{}, invalidf("engine version %q: only 4.x is simulated", s)
	}
	return engineVersion{n[0], n[1], n[2]}, nil
}

// maxVCPUs is MaxNumOfVmCpus for x86: 384 on 4.4 and older, 512 from 4.5.
func (v engineVersion) maxVCPUs() int {
	if v.minor <= 4 {
		return 384
	}
	return 512
}

// checkCorrelationID validates a correlation id like the engine's
// parameter validation: at most 50 characters of [0-9a-zA-Z_-].
func checkCorrelationID(c string) *apiError {
	if len(c) > maxCorrelationIDLength {
		return &apiError{400, reasonFailed, corrTooLongDetail}
	}
	for _, r := range c {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		default:
			return &apiError{400, reasonFailed, corrBadCharsDetail}
		}
	}
	return nil
}

// checkNameAndDescription applies the length limits of a VM's name and description.
func (inv *inventory) checkNameAndDescription(name, description, action string) *apiError {
	if len([]rune(name)) > inv.maxNameLen {
		return cannot(400, action, nameTooLongWhy)
	}
	if len([]rune(description)) > maxDescriptionLength {
		return cannot(400, action, descriptionTooLongWhy)
	}
	return nil
}
