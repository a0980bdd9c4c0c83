//go:build linux

package guest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Template is a built base image: the template disk every guest's root overlays.
type Template struct {
	// Root is the root file system, except /usr.
	Root string
	// Usr holds the image's own /usr files (kubelet, kubeadm, systemctl, units, images);
	// the guest's /usr overlays it on the host's /usr.
	Usr string
}

// TemplateOptions are the inputs of BuildTemplate.
type TemplateOptions struct {
	// Dir is where the template is written (emptied first).
	Dir string
	// Kubelet, Kubeadm and GuestInit are the binaries installed as /usr/bin/kubelet,
	// /usr/bin/kubeadm and /usr/bin/systemctl (guest-init's systemctl).
	Kubelet, Kubeadm, GuestInit string
	// Images are image archives (WriteImage) preloaded into containerd at first boot.
	Images []string
	// Nameserver is the resolver the template's /etc/resolv.conf names until DHCP gives one.
	Nameserver string
}

// Template files, standing for what a kubeadm-ready Debian template carries: the kubelet's
// unit and kubeadm's drop-in as the Kubernetes packages install them, containerd's
// configuration for a cgroupfs host, the kubelet's extra arguments for this host's cgroup v1,
// the sysctls kubeadm's preflight wants, and a oneshot unit that imports the preloaded images.
const (
	kubeletUnit = `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`
	kubeadmDropIn = `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`
	// The hosts of this project run cgroup v1 with the cgroupfs driver (no systemd in the
	// guests): the kubelet is told so here, as a template for such hosts would. The guests'
	// disks are directories of the lab host's file system, which a VM would not share: the
	// kubelet's default eviction thresholds (nodefs 10 %, imagefs 15 % free) would read the
	// host's usage (a host with 14 % free put every guest under DiskPressure), so they are
	// absolute sizes here.
	defaultKubelet = `KUBELET_EXTRA_ARGS="--fail-cgroupv1=false --cgroup-driver=cgroupfs --eviction-hard=memory.available<100Mi,nodefs.available<2Gi,imagefs.available<2Gi"
`
	containerdConfig = `version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  # The hosts of this project cannot lower oom_score_adj (no CAP_SYS_RESOURCE).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
`
	k8sSysctls = `net.ipv4.ip_forward = 1
net.bridge.bridge-nf-call-iptables = 1
net.bridge.bridge-nf-call-ip6tables = 1
`
	preloadUnit = `[Unit]
Description=Import the container images of this template into containerd
After=containerd.service
Requires=containerd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/lib/capov/preload-images

[Install]
WantedBy=multi-user.target
`
	preloadScript = `#!/bin/sh
# Imports the images of /usr/lib/capov/images into containerd's k8s.io namespace once.
set -eu
marker=/var/lib/capov/images-imported
[ -e "$marker" ] && exit 0
i=0
until ctr version >/dev/null 2>&1; do
  i=$((i + 1)); [ "$i" -gt 300 ] && { echo "containerd did not come up" >&2; exit 1; }
  sleep 0.1
done
for f in /usr/lib/capov/images/*.tar; do
  ctr -n k8s.io images import "$f"
done
mkdir -p /var/lib/capov
date -u > "$marker"
`
	cloudTemplateCfg = `# CAPOV test template: the locale a Debian cloud image generates (this host has no
# en_US.UTF-8 locale).
locale: C.UTF-8
# The datasources of an oVirt template: the Engine's config drive (ConfigDrive), or a seed.
# A VM's later runs have no config drive (the Engine attaches the payload on the first run
# only): cloud-init then finds no datasource and does nothing, instead of probing the cloud
# metadata services (EC2 alone waits two minutes for 169.254.169.254). On systemd images
# ds-identify, which a guest here does not run, takes that decision.
datasource_list: [ConfigDrive, NoCloud]
`
)

// BuildTemplate writes the base image: a copy of the host's /etc (Debian, with cloud-init,
// ifupdown, containerd and runc installed), the usual top-level directories, and a /usr layer
// with the Kubernetes node packages' files. Enabled at boot: networking, containerd, the image
// preload and the kubelet; cloud-init's units run in their own order.
func BuildTemplate(ctx context.Context, o TemplateOptions) (*Template, error) {
	if o.Dir == "" || o.Kubelet == "" || o.Kubeadm == "" || o.GuestInit == "" {
		return nil, errors.New("guest template: Dir, Kubelet, Kubeadm and GuestInit are required")
	}
	if err := os.RemoveAll(o.Dir); err != nil {
		return nil, err
	}
	t := &Template{Root: filepath.Join(o.Dir, "root"), Usr: filepath.Join(o.Dir, "usr")}
	for _, d := range []string{t.Root, t.Usr} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", "/etc", filepath.Join(t.Root, "etc")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copying /etc: %w: %s", err, out)
	}
	// Debian's merged /usr, and /var/run and /var/lock in /run (kubeadm dials containerd at
	// /var/run/containerd/containerd.sock, containerd serves /run/containerd/containerd.sock).
	links := map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64",
		"var/run": "../run", "var/lock": "../run/lock"}
	for l, target := range links {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(t.Root, l)), 0o755); err != nil {
			return nil, err
		}
		if err := os.Symlink(target, filepath.Join(t.Root, l)); err != nil {
			return nil, err
		}
	}
	dirs := map[string]os.FileMode{
		"usr": 0o755, "proc": 0o555, "sys": 0o555, "dev": 0o755, "run": 0o755, "tmp": 0o1777, "root": 0o700,
		"home": 0o755, "opt/cni/bin": 0o755, "mnt": 0o755, "media": 0o755, "srv": 0o755, "boot": 0o755,
		"var/lib/dhcp": 0o755, "var/lib/cloud": 0o755, "var/lib/containerd": 0o711, "var/lib/kubelet": 0o755,
		"var/log": 0o755, "var/tmp": 0o1777, "var/cache": 0o755, "var/spool": 0o755, "etc/kubernetes/manifests": 0o755,
	}
	for d, mode := range dirs {
		p := filepath.Join(t.Root, d)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chmod(p, mode); err != nil {
			return nil, err
		}
	}
	// The CNI plugins a node package installs into /opt/cni/bin (kubernetes-cni).
	cni, _ := filepath.Glob("/usr/lib/cni/*")
	for _, p := range cni {
		if err := copyFile(p, filepath.Join(t.Root, "opt/cni/bin", filepath.Base(p)), 0o755); err != nil {
			return nil, err
		}
	}
	if err := configureEtc(filepath.Join(t.Root, "etc"), o); err != nil {
		return nil, err
	}
	usrFiles := map[string]struct {
		src  string
		data string
		mode os.FileMode
	}{
		"bin/kubelet":                              {src: o.Kubelet, mode: 0o755},
		"bin/kubeadm":                              {src: o.Kubeadm, mode: 0o755},
		"bin/systemctl":                            {src: o.GuestInit, mode: 0o755},
		"lib/systemd/system/kubelet.service":       {data: kubeletUnit, mode: 0o644},
		"lib/systemd/system/capov-preload.service": {data: preloadUnit, mode: 0o644},
		"lib/capov/preload-images":                 {data: preloadScript, mode: 0o755},
	}
	for rel, f := range usrFiles {
		dst := filepath.Join(t.Usr, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		var err error
		if f.src != "" {
			err = copyFile(f.src, dst, f.mode)
		} else {
			err = os.WriteFile(dst, []byte(f.data), f.mode)
		}
		if err != nil {
			return nil, err
		}
	}
	images := filepath.Join(t.Usr, "lib/capov/images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		return nil, err
	}
	for _, img := range o.Images {
		if err := copyFile(img, filepath.Join(images, filepath.Base(img)), 0o644); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// configureEtc turns the copy of the host's /etc into the template's.
func configureEtc(etc string, o TemplateOptions) error {
	// Only what this template enables starts at boot; the host's own services do not.
	wants, _ := filepath.Glob(filepath.Join(etc, "systemd/system/*.wants"))
	for _, w := range wants {
		if err := os.RemoveAll(w); err != nil {
			return err
		}
	}
	enable := map[string][]string{
		"multi-user.target": {"/lib/systemd/system/networking.service", "/lib/systemd/system/containerd.service",
			"/usr/lib/systemd/system/capov-preload.service", "/usr/lib/systemd/system/kubelet.service"},
		"cloud-init.target": {"/lib/systemd/system/cloud-init-local.service", "/lib/systemd/system/cloud-init.service",
			"/lib/systemd/system/cloud-config.service", "/lib/systemd/system/cloud-final.service"},
	}
	for target, units := range enable {
		dir := filepath.Join(etc, "systemd/system", target+".wants")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		for _, u := range units {
			if err := os.Symlink(u, filepath.Join(dir, filepath.Base(u))); err != nil {
				return err
			}
		}
	}
	// The services Debian's packages enable that a guest without systemd has no use for (D-Bus,
	// logind, getty, utmp): masked, as an image builder would.
	for _, u := range []string{"dbus.service", "systemd-logind.service", "systemd-user-sessions.service",
		"systemd-update-utmp-runlevel.service", "getty@.service", "e2scrub_reap.service"} {
		if err := os.Symlink(os.DevNull, filepath.Join(etc, "systemd/system", u)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	ns := o.Nameserver
	if ns == "" {
		ns = "127.0.0.1"
	}
	files := map[string]string{
		"hostname":                    "localhost\n",
		"hosts":                       "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"machine-id":                  "",
		"fstab":                       "",
		"resolv.conf":                 "nameserver " + ns + "\n",
		"default/kubelet":             defaultKubelet,
		"containerd/config.toml":      containerdConfig,
		"sysctl.d/99-kubernetes.conf": k8sSysctls,
		"systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
		"cloud/cloud.cfg.d/50-capov-template.cfg":          cloudTemplateCfg,
		"network/interfaces":                               "# interfaces(5) file used by ifup(8) and ifdown(8)\nsource /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n",
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(etc, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		_ = os.Remove(p) // /etc/resolv.conf may be a symlink or a bind target of the host
		if err := os.WriteFile(p, []byte(files[n]), 0o644); err != nil {
			return err
		}
	}
	// cloud-init's state of the host, if any, is not the template's.
	for _, p := range []string{"network/interfaces.d"} {
		entries, _ := os.ReadDir(filepath.Join(etc, p))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "50-cloud-init") {
				_ = os.Remove(filepath.Join(etc, p, e.Name()))
			}
		}
	}
	return nil
}

// copyFile copies src to dst with mode, through a hard link when the file system allows.
func copyFile(src, dst string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	_ = os.Remove(dst)
	if st, err := os.Stat(src); err == nil && st.Mode().Perm() == mode {
		if err := os.Link(src, dst); err == nil {
			return nil
		}
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}
