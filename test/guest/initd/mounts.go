//go:build linux

package initd

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Paths inside the VM's disk directory.
const (
	diskRoot       = "root"       // the mount point of the guest's root
	diskRootUpper  = "root-upper" // the overlay's upper layer of /
	diskRootWork   = "root-work"
	diskUsrUpper   = "usr-upper" // of /usr
	diskUsrWork    = "usr-work"
	diskContainerd = "containerd" // /var/lib/containerd
)

// configDriveDir is where cloud-init's ConfigDrive datasource looks for a config drive's
// files besides block devices labelled config-2 (its seed directory): a tmpfs mounted there
// for this boot only, as the Engine attaches the drive for the first run only.
const configDriveDir = "/var/lib/cloud/seed/config_drive"

// mountRoot builds the guest's root under <disk>/root and pivots into it.
func mountRoot(cfg *Config, l *log.Logger) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	cgroups, err := hostCgroupMounts()
	if err != nil {
		return err
	}
	disk := cfg.Disk
	root := filepath.Join(disk, diskRoot)
	for _, d := range []string{root, diskRootUpper, diskRootWork, diskUsrUpper, diskUsrWork, diskContainerd} {
		if err := os.MkdirAll(filepath.Join(disk, strings.TrimPrefix(d, disk)), 0o755); err != nil {
			return err
		}
	}
	at := func(p string) string { return filepath.Join(root, p) }
	steps := []struct {
		what string
		do   func() error
	}{
		{"/", func() error {
			return unix.Mount("overlay", root, "overlay", 0, fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s",
				cfg.Base, filepath.Join(disk, diskRootUpper), filepath.Join(disk, diskRootWork)))
		}},
		{"/usr", func() error {
			return unix.Mount("overlay", at("usr"), "overlay", 0, fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s",
				strings.Join(cfg.UsrLayers, ":"), filepath.Join(disk, diskUsrUpper), filepath.Join(disk, diskUsrWork)))
		}},
		{"/var/lib/containerd", func() error {
			return bindMount(filepath.Join(disk, diskContainerd), at("var/lib/containerd"))
		}},
		{"/proc", func() error {
			return mountFS("proc", at("proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
		}},
		{"/run", func() error { return mountFS("tmpfs", at("run"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755") }},
		{"/tmp", func() error { return mountFS("tmpfs", at("tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777") }},
		{"/sys", func() error { return mountSys(at("sys"), at("run/guest-init/sysfs"), cfg.VMID) }},
		{"/sys/fs/cgroup", func() error { return mountCgroups(at("sys/fs/cgroup"), cgroups) }},
		{"/dev", func() error {
			if err := mountFS("/dev", at("dev"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return err
			}
			return mountFS("shm", at("dev/shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
		}},
		{"/proc/sys (global sysctls)", func() error { return maskSysctls(at("proc/sys"), at("run/guest-init/sysctl"), cfg.KernelSysctls) }},
		{configDriveDir, func() error { return mountConfigDrive(at(configDriveDir), cfg.ConfigDrive) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	if err := os.MkdirAll(at(".oldroot"), 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, at(".oldroot")); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	_ = os.Remove("/.oldroot")
	// Shared, as on a systemd host: the kubelet and container runtimes rely on it for
	// mount propagation into pods.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("making / shared: %w", err)
	}
	if len(cfg.ConfigDrive) > 0 {
		l.Printf("Config drive attached (%d files)", len(cfg.ConfigDrive))
	}
	return nil
}

func mountFS(source, target, fstype string, flags uintptr, data string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mounting %s on %s: %w", fstype, target, err)
	}
	return nil
}

func bindMount(source, target string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("binding %s on %s: %w", source, target, err)
	}
	return nil
}

// mountSys mounts the guest's sysfs (its network namespace's view) and gives it the VM's
// firmware identity: /sys/class is a tmpfs holding every class of the real sysfs (bind-mounted
// back, so devices added later show) plus dmi/id with the SMBIOS fields the Engine sets; the
// kubelet reads the system UUID from dmi/id/product_uuid.
func mountSys(target, stage, vmID string) error {
	if err := mountFS("sysfs", target, "sysfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := bindMount(filepath.Join(target, "class"), stage); err != nil {
		return err
	}
	class := filepath.Join(target, "class")
	if err := mountFS("tmpfs", class, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755"); err != nil {
		return err
	}
	entries, err := os.ReadDir(stage)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "dmi" {
			continue
		}
		if err := bindMount(filepath.Join(stage, e.Name()), filepath.Join(class, e.Name())); err != nil {
			return err
		}
	}
	id := filepath.Join(class, "dmi", "id")
	if err := os.MkdirAll(id, 0o755); err != nil {
		return err
	}
	for name, v := range map[string]string{
		"product_uuid": vmID, "product_name": "oVirt Node", "sys_vendor": "oVirt", "product_family": "oVirt",
		"product_serial": vmID, "chassis_vendor": "Red Hat", "bios_vendor": "EFI Development Kit II / OVMF",
	} {
		mode := os.FileMode(0o444)
		if name == "product_uuid" || name == "product_serial" {
			mode = 0o400 // root only, as on real firmware
		}
		if err := os.WriteFile(filepath.Join(id, name), []byte(v+"\n"), mode); err != nil {
			return err
		}
	}
	if err := unix.Mount("", class, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("making /sys/class read-only: %w", err)
	}
	// Kernel module parameters are the host's (kube-proxy raises nf_conntrack's hashsize when
	// it finds it small): read-only, so that no guest changes the host's kernel.
	module := filepath.Join(target, "module")
	if err := bindMount(module, module); err != nil {
		return err
	}
	if err := unix.Mount("", module, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("making /sys/module read-only: %w", err)
	}
	return unix.Unmount(stage, unix.MNT_DETACH)
}

// cgroupMount is one cgroup hierarchy of the host.
type cgroupMount struct {
	dir    string // basename under /sys/fs/cgroup ("cpu", "unified")
	fstype string // cgroup or cgroup2
	opts   string // cgroup v1 super options: "cpu", "name=systemd"
}

// hostCgroupMounts lists the cgroup hierarchies mounted under /sys/fs/cgroup.
func hostCgroupMounts() ([]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, fl := range fields {
			if fl == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 || len(fields) < 5 {
			continue
		}
		mp, fstype, super := fields[4], fields[sep+1], fields[sep+3]
		if (fstype != "cgroup" && fstype != "cgroup2") || filepath.Dir(mp) != "/sys/fs/cgroup" {
			continue
		}
		var opts []string
		for _, o := range strings.Split(super, ",") {
			if o != "rw" && o != "ro" {
				opts = append(opts, o)
			}
		}
		out = append(out, cgroupMount{dir: filepath.Base(mp), fstype: fstype, opts: strings.Join(opts, ",")})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	if len(out) == 0 {
		return nil, fmt.Errorf("no cgroup hierarchy under /sys/fs/cgroup")
	}
	return out, nil
}

// mountCgroups mounts every hierarchy again inside the guest's cgroup namespace, where the
// guest's subtree is each hierarchy's root.
func mountCgroups(target string, hier []cgroupMount) error {
	if err := mountFS("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755"); err != nil {
		return err
	}
	for _, h := range hier {
		if err := mountFS("cgroup", filepath.Join(target, h.dir), h.fstype, unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, h.opts); err != nil {
			return err
		}
	}
	return nil
}

// maskSysctls puts files of the guest's own over global sysctls (which the kernel keeps once
// for all network namespaces, and refuses to write from any but the host's): the guest reads
// the values given and writes its own, as a VM with its own kernel would, and nothing it
// writes reaches the host's kernel.
func maskSysctls(procSys, stage string, values map[string]string) error {
	if len(values) == 0 {
		return nil
	}
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rel := strings.ReplaceAll(k, ".", "/")
		dst := filepath.Join(procSys, rel)
		if _, err := os.Stat(dst); err != nil {
			continue // not in this kernel (a module not loaded): nothing to stand for
		}
		f := filepath.Join(stage, strings.ReplaceAll(k, "/", "_"))
		if err := os.WriteFile(f, []byte(values[k]+"\n"), 0o644); err != nil {
			return err
		}
		if err := unix.Mount(f, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("masking %s: %w", k, err)
		}
	}
	return nil
}

// mountConfigDrive attaches this boot's config drive: a tmpfs with its files, read-only.
func mountConfigDrive(target string, files map[string]string) error {
	if len(files) == 0 {
		return nil
	}
	if err := mountFS("config-2", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=755"); err != nil {
		return err
	}
	for p, data := range files {
		full := filepath.Join(target, filepath.Clean("/"+p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(data), 0o444); err != nil {
			return err
		}
	}
	return unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_RDONLY, "")
}
