// Package guest boots real Kubernetes nodes for the oVirt simulator's VMs: a guest is a process
// tree under guest-init (its PID 1) in mount, UTS, PID, network and cgroup namespaces of its
// own, whose root file system is an overlay of the VM's disk directory over a base image
// standing for the template's disk. It runs what a Debian cloud image boots: Debian's
// cloud-init on the config drive the simulator renders as the Engine does, ifupdown and
// dhclient on the lab network, containerd, and the kubelet supervised the way its systemd
// unit and kubeadm's drop-in say. docs/proposals/2026-12-04-real-guests.md records the design.
//
// Everything here needs root and runs only inside the private namespaces of hack/e2e.sh:
// the lab's bridge and the guests' veths, mounts and cgroups never touch the host.
package guest
