//go:build linux

package initd

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Config is what the host (test/guest.Host) tells a guest's init about the machine it boots:
// written as JSON into the VM's directory and read before the guest pivots into its root.
// Paths are the host's.
type Config struct {
	// VMID is the VM's id: the SMBIOS system UUID the guest's firmware reports
	// (/sys/class/dmi/id/product_uuid), as the Engine sets it.
	VMID string `json:"vmID"`
	// Base is the base image's root file system (the template's disk).
	Base string `json:"base"`
	// UsrLayers are the lower layers of the guest's /usr, highest first: the base image's own
	// /usr files, then the host's /usr (read-only to the guest: writes go to the VM's disk).
	UsrLayers []string `json:"usrLayers"`
	// Disk is the VM's disk directory: the upper layers of / and /usr and containerd's root,
	// kept across stops and reboots; the host removes it with the VM.
	Disk string `json:"disk"`
	// ConfigDrive is the config drive attached at this start (the Engine's payload, on the
	// first run only): files by path relative to the drive's root. Empty: none attached.
	ConfigDrive map[string]string `json:"configDrive,omitempty"`
	// NICs are the VM's network interfaces, in order; the host moves a veth with the NIC's
	// MAC into the guest under Name before it lets the guest boot.
	NICs []NIC `json:"nics"`
	// KernelSysctls are global (not per network namespace) sysctls the guest must see with
	// these values: read-only files over /proc/sys, so that a kubelet finds the values it wants
	// and never writes the host's.
	KernelSysctls map[string]string `json:"kernelSysctls,omitempty"`
	// StopTimeout bounds each service's stop at shutdown (systemd's TimeoutStopSec, capped).
	StopTimeout Duration `json:"stopTimeout,omitempty"`
	// Provisioner is what the template's image runs on its first boot to apply the boot input:
	// ProvisionerCloudInit (a cloud image: cloud-init on every boot) or ProvisionerIgnition
	// (RHCOS, Fedora CoreOS, Flatcar: Ignition once, no cloud-init).
	Provisioner string `json:"provisioner,omitempty"`
}

// The first-boot provisioners of a template's image.
const (
	ProvisionerCloudInit = "cloud-init"
	ProvisionerIgnition  = "ignition"
)

// NIC is one network interface of the guest.
type NIC struct {
	Name string `json:"name"`
	MAC  string `json:"mac"`
}

// Duration is a time.Duration written as a Go duration string in JSON.
type Duration struct{ time.Duration }

// MarshalJSON writes the duration as "10s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads "10s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// ReadConfig reads a Config file.
func ReadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the guest config: %w", err)
	}
	c := &Config{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("parsing the guest config %s: %w", path, err)
	}
	switch {
	case c.VMID == "" || c.Base == "" || c.Disk == "" || len(c.UsrLayers) == 0:
		return nil, fmt.Errorf("guest config %s: vmID, base, disk and usrLayers are required", path)
	}
	switch c.Provisioner {
	case "":
		c.Provisioner = ProvisionerCloudInit
	case ProvisionerCloudInit, ProvisionerIgnition:
	default:
		return nil, fmt.Errorf("guest config %s: provisioner %q: want %q or %q", path, c.Provisioner, ProvisionerCloudInit, ProvisionerIgnition)
	}
	if c.StopTimeout.Duration <= 0 {
		c.StopTimeout.Duration = 20 * time.Second
	}
	return c, nil
}

// WriteConfig writes c to path (mode 0600: it holds the boot input, which may hold secrets).
func WriteConfig(path string, c *Config) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
