// Package initd is guest-init, the PID 1 of a guest (test/guest): it makes the guest's mounts,
// pivots into its root file system and boots it the way systemd boots a Debian cloud image,
// with a small service manager that reads the image's unit files and answers the guest's
// systemctl. It is a program's package (test/guest/cmd/guest-init), Linux only.
package initd
