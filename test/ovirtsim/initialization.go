package ovirtsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Formats of the initialization data the engine builds on a VM's first run.
const (
	InitFormatIgnition  = "ignition"
	InitFormatCloudInit = "cloud-init"
	InitFormatSysprep   = "sysprep"
)

// ignitionOSTypes maps OS types whose osinfo vmInitType is Ignition to the
// Ignition version the engine writes (packaging/conf/osinfo-defaults.properties:
// os.rhcos_x64.vmInitType.value = ignition_2.3.0).
var ignitionOSTypes = map[string]string{"rhcos_x64": "2.3.0"}

// VMInitialization is the initialization payload the engine composed for a
// VM on its first run (RunVmCommand.updateVmInit). It is not on the REST API;
// tests read it with Simulator.Initialization or GET /sim/vms/{id}/initialization.
type VMInitialization struct {
	// OSType is the OS type that chose the format (the VM's, else its template's).
	OSType string `json:"os_type"`
	// Format is "ignition", "cloud-init" or "sysprep".
	Format string `json:"format"`
	// UserData is what the guest receives: the Ignition JSON, or the
	// cloud-init user-data ("#cloud-config\n" + the engine's YAML + custom_script).
	UserData string `json:"user_data"`
	// MetaData is the config drive's openstack/latest/meta_data.json: the host name (hostname,
	// name), the authorized keys (public_keys), a new random uuid, the engine's fixed entries.
	MetaData string `json:"meta_data"`
	// NetworkData is the OpenStack network_data.json the engine wrote next to the user data
	// from nic_configurations, dns_servers and dns_search (for Ignition VMs too, whose guest
	// ignores it); empty without them.
	NetworkData string `json:"network_data,omitempty"`
	// Network is how the guest configured its NIC interfaces (eth0, eth1, ... for the plugged
	// NICs in order) from this initialization: cloud-init from the nic_configurations by
	// interface name, Ignition from the NetworkManager keyfiles of the config by MAC address or
	// interface name. Nil when the initialization carries no network configuration.
	Network []GuestNetwork `json:"network,omitempty"`
	// ComposedAt is when the VM was first started.
	ComposedAt time.Time `json:"composed_at"`
}

// composeInit builds the initialization payload of v for its first run. It
// returns nil when the VM has no initialization at all.
func composeInit(v *vm, now time.Time) (*VMInitialization, *apiError) {
	if v.customScript == "" && v.hostName == "" && v.initUser == "" && v.sshKeys == "" && !v.hasNetworkInit() {
		return nil, nil
	}
	in := &VMInitialization{OSType: v.osType, ComposedAt: now, MetaData: engineMetaData(v), NetworkData: openStackNetworkData(v)}
	switch ignVersion, ignition := ignitionOSTypes[v.osType]; {
	case ignition:
		in.Format = InitFormatIgnition
		data, err := ignitionData(v, ignVersion)
		if err != nil {
			// CreateBrokerVDSCommand.getPayload: RuntimeException("Failed to build ignition data:", e).
			return nil, cannot(400, "run VM", "Failed to build ignition data: "+err.Error())
		}
		in.UserData = data
		// IgnitionHandler never reads the networks: only the config's own keyfiles count.
		in.Network = ignitionGuestNetwork(v, data)
	case strings.HasPrefix(v.osType, "windows"):
		// Sysprep's network settings are not modelled.
		in.Format, in.UserData, in.NetworkData, in.MetaData = InitFormatSysprep, v.customScript, "", ""
	default:
		in.Format, in.UserData = InitFormatCloudInit, cloudInitUserData(v)
		in.Network = cloudInitGuestNetwork(v)
	}
	return in, nil
}

// ignitionData is IgnitionHandler.handle: the custom script ("{}" when empty) is the config,
// edited three times, each edit re-serialising it (javax.json: compact, keys in insertion
// order) and none when nothing is to add:
//   - handleIgnitionVersion: without ignition.version, an "ignition" object (the config's own
//     keys, then version from osinfo) goes first, the config's other keys after it;
//   - handleHostname: with a host name and no storage.files entry whose JSON contains
//     "path":"/etc/hostname", the entry {filesystem: root, path: /etc/hostname, mode: 420,
//     contents: {source: "data:,<host name>"}} is appended to storage.files ("storage" then
//     goes first); a config with a storage object but no files gets a storage of that entry
//     only (JsonObjectBuilder.add replaces the key: the rest of storage is lost);
//   - handleUser: with a user name that is not in the first passwd user's JSON, a user
//     {name, passwordHash: the root password} is merged into passwd.users when the script
//     contains "users" anywhere, else passwd is replaced by it; a null root password is
//     refused (javax.json's builder throws on null).
//
// A script that is not a JSON object fails ("Failed to build ignition data").
func ignitionData(v *vm, version string) (string, error) {
	script := v.customScript
	if script == "" {
		script = "{}"
	}
	if _, err := parseJSONObject(script); err != nil {
		return "", fmt.Errorf("custom_script is not a JSON Ignition config: %w", err)
	}
	var err error
	if script, err = ignitionWithVersion(script, version); err != nil {
		return "", err
	}
	if v.hostName != "" {
		if script, err = ignitionWithHostname(script, v.hostName); err != nil {
			return "", err
		}
	}
	if v.initUser != "" {
		if script, err = ignitionWithUser(script, v.initUser); err != nil {
			return "", err
		}
	}
	return script, nil
}

func ignitionWithVersion(script, version string) (string, error) {
	cfg, _ := parseJSONObject(script)
	ign, hasIgn := cfg.get("ignition")
	var ignObj *jsonObject
	if hasIgn {
		o, err := parseJSONObject(string(ign))
		if err != nil {
			// getJsonObject: ClassCastException.
			return "", fmt.Errorf("ignition is not an object: %w", err)
		}
		if _, ok := o.get("version"); ok {
			return script, nil
		}
		ignObj = o
	} else {
		ignObj = &jsonObject{}
	}
	ignObj.set("version", rawString(version))
	out := &jsonObject{}
	out.set("ignition", json.RawMessage(ignObj.String()))
	out.addAllExcept(cfg, "ignition")
	return out.String(), nil
}

func ignitionWithHostname(script, host string) (string, error) {
	cfg, _ := parseJSONObject(script)
	entry := &jsonObject{}
	entry.set("filesystem", rawString("root"))
	entry.set("path", rawString("/etc/hostname"))
	entry.set("mode", json.RawMessage("420"))
	contents := &jsonObject{}
	contents.set("source", rawString("data:,"+host))
	entry.set("contents", json.RawMessage(contents.String()))
	storageRaw, hasStorage := cfg.get("storage")
	var storage *jsonObject
	if hasStorage {
		var err error
		if storage, err = parseJSONObject(string(storageRaw)); err != nil {
			return "", fmt.Errorf("storage is not an object: %w", err)
		}
	}
	if storage != nil {
		if files, ok := storage.get("files"); ok {
			if strings.Contains(compactJSON(files), `"path":"/etc/hostname"`) {
				return script, nil
			}
			var list []json.RawMessage
			if err := json.Unmarshal(files, &list); err != nil {
				return "", fmt.Errorf("storage.files is not an array: %w", err)
			}
			list = append(list, json.RawMessage(entry.String()))
			newStorage := &jsonObject{}
			newStorage.addAllExcept(storage, "files")
			newStorage.set("files", jsonArray(list))
			out := &jsonObject{}
			out.set("storage", json.RawMessage(newStorage.String()))
			out.addAllExcept(cfg, "storage")
			return out.String(), nil
		}
	}
	out := &jsonObject{}
	out.addAllExcept(cfg, "")
	out.set("storage", json.RawMessage(`{"files":[`+entry.String()+`]}`))
	return out.String(), nil
}

func ignitionWithUser(script, user string) (string, error) {
	cfg, _ := parseJSONObject(script)
	if passwdRaw, ok := cfg.get("passwd"); ok {
		if passwd, err := parseJSONObject(string(passwdRaw)); err == nil {
			if users, ok := passwd.get("users"); ok {
				var list []json.RawMessage
				if err := json.Unmarshal(users, &list); err == nil && len(list) > 0 &&
					strings.Contains(strings.ReplaceAll(compactJSON(list[0]), `"`, ""), user) {
					return script, nil
				}
			}
		}
	}
	// userIgnitionSnippet: passwordHash is the root password, which this simulator does not
	// keep; the Engine's JSON builder refuses a null one.
	return "", fmt.Errorf("java.lang.NullPointerException: the user %s has no root password for its passwordHash", user)
}

// jsonObject is a JSON object that keeps its keys in insertion order, as javax.json's
// builders do; setting an existing key replaces its value in place.
type jsonObject struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseJSONObject(s string) (*jsonObject, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	o := &jsonObject{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("an object key is not a string")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		o.set(key, raw)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("text after the JSON object")
	}
	return o, nil
}

func (o *jsonObject) get(k string) (json.RawMessage, bool) {
	v, ok := o.vals[k]
	return v, ok
}

func (o *jsonObject) set(k string, v json.RawMessage) {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *jsonObject) addAllExcept(from *jsonObject, skip string) {
	for _, k := range from.keys {
		if k != skip {
			o.set(k, from.vals[k])
		}
	}
}

// String is the object in compact JSON.
func (o *jsonObject) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(jsonString(k))
		b.WriteByte(':')
		b.WriteString(compactJSON(o.vals[k]))
	}
	b.WriteByte('}')
	return b.String()
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func rawString(s string) json.RawMessage { return json.RawMessage(jsonString(s)) }

func jsonArray(items []json.RawMessage) json.RawMessage {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = compactJSON(it)
	}
	return json.RawMessage("[" + strings.Join(parts, ",") + "]")
}

// cloudInitUserData composes the user-data like the engine's CloudInitHandler.getUserData:
// "#cloud-config\n", the engine's own YAML map, then custom_script appended verbatim. The
// custom script's own first line (a "## template: jinja" or "#cloud-config" header) is
// therefore never the first line of what the guest reads, and a key of the engine's map that
// the script sets again (runcmd, say) appears twice in one YAML document.
func cloudInitUserData(v *vm) string {
	return "#cloud-config\n" + engineUserDataMap(v) + v.customScript
}

// Initialization returns the payload the engine composed on the VM's first
// run. It fails with ErrNotFound for an unknown VM and with ErrConflict when
// the VM has not run yet or has no initialization.
func (s *Simulator) Initialization(vmID string) (VMInitialization, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, err := s.lookupVM(vmID)
	if err != nil {
		return VMInitialization{}, err
	}
	if v.init == nil {
		if !v.initialized {
			return VMInitialization{}, fmt.Errorf("VM %s has not run yet: %w", v.name, ErrConflict)
		}
		return VMInitialization{}, fmt.Errorf("VM %s ran without initialization: %w", v.name, ErrConflict)
	}
	return *v.init, nil
}
