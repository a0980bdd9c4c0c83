package ovirtsim

import (
	"fmt"
	"time"
)

// SetHostDevices replaces a host's device passthrough support and its devices at run time, as
// if VDSM reported new hardware (the same checks and defaults as the seed's Host.DevicePassthrough
// and Host.Devices; none: no device at all). The Engine stores the devices' available_instances
// as VDSM reports them now (the vGPUs of the VMs running there taken). It fails with ErrNotFound
// for an unknown host, ErrInvalid for a device the seed would refuse, and ErrConflict while a VM
// has host devices of that host configured (detach them first).
func (s *Simulator) SetHostDevices(hostName string, passthrough bool, devices ...HostDeviceSeed) error {
	devs, err := newHostDevices(Host{Name: hostName, Devices: devices})
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.inv.hostByName[hostName]
	if h == nil {
		return fmt.Errorf("host %q: %w", hostName, ErrNotFound)
	}
	for _, v := range s.inv.vms {
		for _, hd := range v.hostDevs {
			if hd.host == h {
				return fmt.Errorf("host %q: VM %q has its device %q configured: %w", hostName, v.name, hd.dev.name, ErrConflict)
			}
		}
	}
	h.passthrough, h.devices = passthrough, devs
	s.inv.refreshHostDevices(h, time.Now())
	return nil
}
