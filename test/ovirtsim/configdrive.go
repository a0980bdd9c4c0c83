package ovirtsim

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
)

// The config drive the engine builds for a cloud-init or Ignition guest (vdsbroker
// CloudInitHandler.getFileData; IgnitionHandler is the same handler with the custom script as
// the whole user data). VDSM writes these files into an ISO 9660 image labelled "config-2"
// that the guest sees as a CD-ROM.
const (
	ConfigDriveLabel       = "config-2"
	ConfigDriveMetaData    = "openstack/latest/meta_data.json"
	ConfigDriveUserData    = "openstack/latest/user_data"
	ConfigDriveNetworkData = "openstack/latest/network_data.json"
)

// ConfigDriveFile is one file of a config drive, its path relative to the drive's root.
type ConfigDriveFile struct {
	Path string `json:"path"`
	Data string `json:"data"`
}

// ConfigDrive returns the files of the config drive this initialization gives the guest:
// meta_data.json and user_data, and network_data.json only when the networks produced one
// (the engine never writes an empty one: cloud-init 0.7.9 fails on it). A sysprep
// initialization has no config drive (nil).
func (in VMInitialization) ConfigDrive() []ConfigDriveFile {
	if in.Format == InitFormatSysprep {
		return nil
	}
	files := []ConfigDriveFile{{ConfigDriveMetaData, in.MetaData}, {ConfigDriveUserData, in.UserData}}
	if in.NetworkData != "" {
		files = append(files, ConfigDriveFile{ConfigDriveNetworkData, in.NetworkData})
	}
	return files
}

// entry is one key of a map the engine builds as a java.util.HashMap and serialises.
type entry struct {
	key   string
	value any // string, int, bool, []string or []entry (a nested map)
}

// hashMapOrder returns entries (given in insertion order) in the order a java.util.HashMap
// iterates them: by bucket, (h ^ h>>>16) & (capacity-1) of String.hashCode, then by insertion
// within a bucket (the default capacity 16, doubled past a load of 0.75; a resize keeps the
// order within the split buckets). Both the YAML and the JSON of the config drive are written
// from HashMaps, so this is the order a guest reads.
func hashMapOrder(entries []entry) []entry {
	capacity := 16
	for len(entries) > capacity*3/4 {
		capacity *= 2
	}
	buckets := make([][]entry, capacity)
	for _, e := range entries {
		var h int32
		for _, c := range utf16.Encode([]rune(e.key)) {
			h = 31*h + int32(c)
		}
		i := (uint32(h) ^ uint32(h)>>16) & uint32(capacity-1)
		buckets[i] = append(buckets[i], e)
	}
	out := make([]entry, 0, len(entries))
	for _, b := range buckets {
		out = append(out, b...)
	}
	return out
}

// engineMetaData is meta_data.json (CloudInitHandler.storeHostname, storeAuthorizedKeys,
// storeExecutionParameters): the host name as hostname and name, the authorized keys split
// into lines, a new random uuid on every composition (a new instance id for cloud-init),
// and the engine's fixed entries.
func engineMetaData(v *vm) string {
	var md []entry
	if v.hostName != "" {
		md = append(md, entry{"hostname", v.hostName}, entry{"name", v.hostName})
	}
	if keys := authorizedKeyLines(v.sshKeys); len(keys) > 0 {
		md = append(md, entry{"public_keys", keys})
	}
	md = append(md,
		entry{"uuid", randomUUID()},
		entry{"meta", []entry{{"dsmode", "local"}, {"essential", "false"}, {"role", "server"}}},
		entry{"launch_index", "0"},
		entry{"availability_zone", "nova"},
	)
	var b strings.Builder
	writeJacksonJSON(&b, md, "")
	return b.String()
}

// engineUserDataMap is the YAML map the engine writes before the custom script
// (CloudInitHandler.storeUserName and storeExecutionParameters; time zone, root password and
// regenerated SSH keys are not simulated).
func engineUserDataMap(v *vm) string {
	var ud []entry
	if v.initUser != "" {
		ud = append(ud, entry{"user", v.initUser})
	}
	ud = append(ud,
		entry{"disable_root", 0},
		entry{"output", []entry{{"all", ">> /var/log/cloud-init-output.log"}}},
		entry{"runcmd", []string{`sed -i '/^datasource_list: /d' /etc/cloud/cloud.cfg; echo 'datasource_list: ["NoCloud", "ConfigDrive"]' >> /etc/cloud/cloud.cfg`}},
		entry{"chpasswd", []entry{{"expire", false}}},
		entry{"ssh_pwauth", true},
	)
	var b strings.Builder
	writeYAML(&b, ud, "")
	return b.String()
}

// authorizedKeyLines splits authorized keys like normalizeAuthorizedKeys: on runs of line
// breaks, dropping empty entries.
func authorizedKeyLines(keys string) []string {
	var out []string
	for _, k := range strings.FieldsFunc(keys, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if k != "" {
			out = append(out, k)
		}
	}
	return out
}

// writeYAML writes a map in SnakeYAML's block style (DumperOptions.FlowStyle.BLOCK): "key:
// value", nested maps indented by two, sequences as "- item" at the key's indentation.
// SnakeYAML's folding of long quoted scalars at 80 columns is not reproduced (a YAML reader
// folds them back to the same string).
func writeYAML(b *strings.Builder, m []entry, indent string) {
	for _, e := range hashMapOrder(m) {
		switch val := e.value.(type) {
		case []entry:
			fmt.Fprintf(b, "%s%s:\n", indent, e.key)
			writeYAML(b, val, indent+"  ")
		case []string:
			fmt.Fprintf(b, "%s%s:\n", indent, e.key)
			for _, s := range val {
				fmt.Fprintf(b, "%s- %s\n", indent, yamlScalar(s))
			}
		default:
			fmt.Fprintf(b, "%s%s: %s\n", indent, e.key, yamlScalar(val))
		}
	}
}

// yamlScalar writes a scalar as SnakeYAML chooses its style: plain when a plain scalar reads
// back as the same string, else single-quoted, else (line breaks) double-quoted.
func yamlScalar(v any) string {
	switch val := v.(type) {
	case int:
		return strconv.Itoa(val)
	case bool:
		return strconv.FormatBool(val)
	case string:
		switch {
		case plainYAML(val):
			return val
		case !strings.ContainsAny(val, "\n\r"):
			return "'" + strings.ReplaceAll(val, "'", "''") + "'"
		default:
			return strconv.Quote(val)
		}
	}
	panic(fmt.Sprintf("ovirtsim: no YAML form for %T", v))
}

// plainYAML reports whether s can be written as a plain scalar that a YAML 1.1 reader takes
// for the same string (not a bool, number or null, no indicator at the start, no ": " or
// " #" inside, no surrounding spaces).
func plainYAML(s string) bool {
	if s == "" || strings.TrimSpace(s) != s || strings.ContainsAny(s[:1], "-?:,[]{}#&*!|>'\"%@`") ||
		strings.Contains(s, ": ") || strings.Contains(s, " #") || strings.HasSuffix(s, ":") || strings.ContainsAny(s, "\n\r\t") {
		return false
	}
	switch strings.ToLower(s) {
	case "y", "yes", "n", "no", "true", "false", "on", "off", "null", "~":
		return false
	}
	if _, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64); err == nil {
		return false
	}
	return true
}

// writeJacksonJSON writes a map as Jackson's default pretty printer does: objects one key a line
// ("key" : value), arrays on one line.
func writeJacksonJSON(b *strings.Builder, m []entry, indent string) {
	b.WriteString("{\n")
	for i, e := range hashMapOrder(m) {
		fmt.Fprintf(b, "%s  %s : ", indent, jsonString(e.key))
		switch val := e.value.(type) {
		case []entry:
			writeJacksonJSON(b, val, indent+"  ")
		case []string:
			q := make([]string, len(val))
			for j, s := range val {
				q[j] = jsonString(s)
			}
			fmt.Fprintf(b, "[ %s ]", strings.Join(q, ", "))
		case string:
			b.WriteString(jsonString(val))
		default:
			fmt.Fprintf(b, "%v", val)
		}
		if i < len(m)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(indent + "}")
}

// jsonString writes s as a JSON string (without the HTML escapes of encoding/json's default).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		panic(fmt.Sprintf("ovirtsim: encoding a string: %v", err)) // a string always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// randomUUID returns a random (version 4) UUID, as java.util.UUID.randomUUID.
func randomUUID() string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		panic(fmt.Sprintf("ovirtsim: reading random bytes: %v", err))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
