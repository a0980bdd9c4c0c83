package v1beta2

import "strings"

// VMIDFromProviderID returns the oVirt VM id of a providerID of the form the manager writes,
// ProviderIDPrefix followed by a UUID (8-4-4-4-12 hex digits, either case), and false for any
// other string: an id taken from a providerID becomes part of Engine request paths, so nothing
// but a UUID may pass.
func VMIDFromProviderID(providerID string) (string, bool) {
	id, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok || !IsUUID(id) {
		return "", false
	}
	return id, true
}

// IsUUID reports whether s is a UUID in its textual form: 8-4-4-4-12 hex digits, either case.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if ('0' > c || c > '9') && ('a' > c || c > 'f') && ('A' > c || c > 'F') {
				return false
			}
		}
	}
	return true
}
