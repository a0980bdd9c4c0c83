package ovirtsim_test

import (
	ovirtsdk "github.com/ovirt/go-ovirt"
)

// deviceNamed returns the reported device with that name, or nil.
func deviceNamed(devs []*ovirtsdk.ReportedDevice, name string) *ovirtsdk.ReportedDevice {
	for _, d := range devs {
		if n, _ := d.Name(); n == name {
			return d
		}
	}
	return nil
}
