package ovirtsim

import (
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

// ignitionData checks that custom_script is a JSON Ignition config; without
// one the engine writes its own minimal config.
func ignitionData(v *vm, version string) (string, error) {
	if v.customScript == "" {
		cfg := map[string]any{"ignition": map[string]any{"version": version}}
		if v.hostName != "" {
			cfg["storage"] = map[string]any{"files": []any{map[string]any{
				"filesystem": "root", "path": "/etc/hostname", "mode": 420,
				"contents": map[string]any{"source": "data:," + v.hostName},
			}}}
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return "", fmt.Errorf("encoding the engine's ignition config: %w", err)
		}
		return string(b), nil
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(v.customScript), &cfg); err != nil {
		return "", fmt.Errorf("custom_script is not a JSON Ignition config: %w", err)
	}
	ign, ok := cfg["ignition"].(map[string]any)
	if !ok {
		return "", fmt.Errorf("custom_script has no \"ignition\" object")
	}
	if ver, ok := ign["version"].(string); !ok || ver == "" {
		return "", fmt.Errorf("custom_script has no ignition.version")
	}
	return v.customScript, nil
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
