//go:build linux

package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/capov/capov/test/guest"
	"github.com/capov/capov/test/ovirtsim"
)

// startGuests makes the simulator's VMs boot real guests (test/guest): the template and
// guest-init built by the caller, the VMs' disks under dir, their NICs on bridge. It needs
// root and private namespaces (hack/e2e.sh); the returned function powers every guest off.
func startGuests(sim *ovirtsim.Simulator, o guestFlags, stderr io.Writer) (func(), error) {
	rt, err := guest.NewSimRuntime(guest.HostOptions{
		Dir:         o.dir,
		Template:    &guest.Template{Root: filepath.Join(o.template, "root"), Usr: filepath.Join(o.template, "usr")},
		GuestInit:   o.guestInit,
		Bridge:      o.bridge,
		StopTimeout: o.stopTimeout,
		Log:         func(s string) { fmt.Fprintln(stderr, "ovirtsim: guests:", s) },
	})
	if err != nil {
		return nil, fmt.Errorf("real guests: %w", err)
	}
	rt.Attach(sim)
	return rt.Close, nil
}

// guestFlags are the command's --guest-* flags.
type guestFlags struct {
	dir, template, guestInit, bridge string
	stopTimeout                      time.Duration
}
