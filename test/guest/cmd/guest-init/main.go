//go:build linux

// Command guest-init is the PID 1 of a test/guest guest, and its systemctl: installed in the
// base image as /usr/bin/systemctl, it talks to the running guest-init.
//
//	guest-init start --config FILE   as the host starts it (waits on fd 3, then boots)
//	guest-init boot --config FILE    the boot itself, after entering the cgroup namespace
//	systemctl ARGS...                inside the guest
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/capov/capov/test/guest/initd"
)

func main() {
	if filepath.Base(os.Args[0]) == "systemctl" {
		os.Exit(initd.Systemctl(os.Args[1:]))
	}
	if len(os.Args) != 4 || os.Args[2] != "--config" {
		fmt.Fprintln(os.Stderr, "usage: guest-init start|boot --config FILE")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "start":
		err = initd.Stage0(os.Args[3])
	case "boot":
		err = initd.Stage1(os.Args[3])
	default:
		err = fmt.Errorf("unknown stage %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "guest-init:", err)
		os.Exit(1)
	}
}
