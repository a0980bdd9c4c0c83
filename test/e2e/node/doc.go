// Package node builds a real single-node Kubernetes cluster for end-to-end tests: etcd and
// kube-apiserver (the envtest binaries), containerd and runc (Debian's), kubelet,
// kube-controller-manager, kube-scheduler, kube-proxy (iptables mode) and CoreDNS (built from
// Go modules by hack/node-assets.sh), with a CNI bridge, and images imported from archives
// (nothing is ever pulled).
//
// Everything happens inside a network namespace and a mount namespace of the test process,
// made by hack/e2e.sh (`unshare --net --mount --propagation private --fork`): the node's
// interfaces, routes, firewall rules, ports, sysctls of the network namespace and mounts never
// reach the host. Up refuses to run anywhere else (CheckIsolation). The only things shared
// with the host are the cgroup hierarchies, where the node keeps to a subtree of its own
// (capov-e2e-<pid>) that Down removes, and the file system below Options.WorkDir.
//
//	c, err := node.Up(ctx, node.Options{WorkDir: t.TempDir(), Assets: dirs, Out: os.Stderr})
//	...
//	defer c.Down(ctx)
//	err = c.ImportImage(ctx, "bin/images/manager.tar")
//	cs := kubernetes.NewForConfigOrDie(c.RestConfig())
//
// The measured facts this follows (versions, the traps of the project's machines and their
// fixes) are in shared/reference/real-node.md.
package node
