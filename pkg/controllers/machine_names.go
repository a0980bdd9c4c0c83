package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// Engine limits on VM names and descriptions (MaxVmNameLength, VmBase.description), and the
// longest DNS label a guest host name may have.
const (
	maxVMNameLength      = 64
	maxDescriptionLength = 255
	maxHostNameLength    = 63
	// nameHashLength is the number of hex digits of the hash that makes a shortened name unique.
	nameHashLength = 8
)

// VMNameFor returns the oVirt VM name of the OVirtMachine namespace/name: the name itself when
// the Engine accepts it (at most 64 characters), else a readable prefix of it, a dash and 8 hex
// digits of the SHA-256 of namespace/name — 63 characters in all, so the same name is also a
// valid host name. It is deterministic, so a VM created just before a crash is found again by
// name; the owner marker, not the name, proves the VM is this machine's.
func VMNameFor(namespace, name string) string {
	if len(name) <= maxVMNameLength {
		return name
	}
	return shortened(namespace, name, maxHostNameLength)
}

// hostNameFor returns the guest host name of the machine: its name when it fits in a DNS label,
// else the shortened VM name.
func hostNameFor(namespace, name string) string {
	if len(name) <= maxHostNameLength {
		return name
	}
	return shortened(namespace, name, maxHostNameLength)
}

// shortened cuts name to a prefix that, with "-" and the hash, is at most limit characters, and
// never ends the prefix with a dot or a dash (a DNS label must end with a letter or a digit).
func shortened(namespace, name string, limit int) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	suffix := hex.EncodeToString(sum[:])[:nameHashLength]
	prefix := strings.TrimRight(name[:limit-1-nameHashLength], ".-")
	return prefix + "-" + suffix
}

// vmNameOf returns the VM name of the machine: the one recorded in status, else the derived one.
func vmNameOf(om *infrav1.OVirtMachine) string {
	if om.Status.VMName != "" {
		return om.Status.VMName
	}
	return VMNameFor(om.Namespace, om.Name)
}

// truncateText cuts s to at most limit bytes without splitting a UTF-8 character, ending with
// "..." when it was cut.
func truncateText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
