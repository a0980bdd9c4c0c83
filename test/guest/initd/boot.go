//go:build linux

package initd

import (
	"bufio"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bootUnits are the units a Debian cloud image runs before its multi-user services, in the
// order their After=/Before= put them: cloud-init's local stage (it reads the config drive and
// renders the network configuration), ifupdown, cloud-init's network stage and its config
// modules. cloud-init's final stage (runcmd: kubeadm) runs after multi-user.target, that is
// after every enabled service has started and every enabled oneshot has run.
var bootUnits = []string{"cloud-init-local.service", "networking.service", "cloud-init.service", "cloud-config.service"}

const finalUnit = "cloud-final.service"

// Stage0 is guest-init as the host starts it, PID 1 in new mount, UTS, PID and network
// namespaces: it waits until the host has put it into the guest's cgroups and moved the NICs
// in (a byte on fd 3), then enters a cgroup namespace of its own (the guest sees its subtree as
// the root) and executes itself again as Stage1, so that every thread is in that namespace.
func Stage0(configPath string) error {
	sync := os.NewFile(3, "sync")
	if sync == nil {
		return errors.New("guest-init: no sync descriptor (fd 3) from the host")
	}
	b := make([]byte, 1)
	if _, err := sync.Read(b); err != nil {
		return fmt.Errorf("guest-init: waiting for the host: %w", err)
	}
	_ = sync.Close()
	if b[0] != 'g' {
		return errors.New("guest-init: the host cancelled the boot")
	}
	runtime.LockOSThread()
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("guest-init: entering a cgroup namespace: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	return syscall.Exec(self, []string{"guest-init", "boot", "--config", configPath}, os.Environ())
}

// Stage1 makes the guest's mounts, pivots into its root and boots it; it returns when the
// guest has shut down (SIGTERM: ACPI power button) or its boot failed before any service ran.
func Stage1(configPath string) error {
	l := log.New(os.Stdout, "guest-init: ", log.Ldate|log.Ltime|log.Lmicroseconds|log.LUTC)
	cfg, err := ReadConfig(configPath)
	if err != nil {
		return err
	}
	if os.Getpid() != 1 {
		return fmt.Errorf("guest-init must be PID 1 of its PID namespace, is %d", os.Getpid())
	}
	start := time.Now()
	if err := mountRoot(cfg, l); err != nil {
		return fmt.Errorf("guest-init: mounting the guest's file systems: %w", err)
	}
	l.Printf("Root file system ready (%s)", time.Since(start).Round(time.Millisecond))
	m := newManager(l, cfg.StopTimeout.Duration)
	go m.reap(nil) // for the guest's life
	if err := os.MkdirAll(filepath.Dir(controlSocket), 0o755); err != nil {
		return err
	}
	ln, err := net.Listen("unix", controlSocket)
	if err != nil {
		return fmt.Errorf("guest-init: control socket: %w", err)
	}
	go m.serveControl(ln)

	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGPWR)
	booted := make(chan struct{})
	go func() {
		defer close(booted)
		m.boot(cfg, l, start)
	}()
	<-term
	l.Printf("Shutting down")
	m.stopAll()
	<-waitOrTimeout(booted, 5*time.Second)
	killRest(l)
	_ = ln.Close()
	unix.Sync()
	l.Printf("Powered off")
	return nil
}

func waitOrTimeout(ch <-chan struct{}, d time.Duration) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-ch:
		case <-time.After(d):
		}
		close(out)
	}()
	return out
}

// killRest ends every process left in the guest: SIGTERM, then SIGKILL.
func killRest(l *log.Logger) {
	_ = syscall.Kill(-1, syscall.SIGTERM)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if len(otherPIDs()) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if left := otherPIDs(); len(left) > 0 {
		l.Printf("Killing %d processes that ignored SIGTERM", len(left))
	}
	_ = syscall.Kill(-1, syscall.SIGKILL)
}

// otherPIDs lists the guest's processes other than PID 1.
func otherPIDs() []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if n := e.Name(); n != "1" && strings.Trim(n, "0123456789") == "" {
			out = append(out, n)
		}
	}
	return out
}

// boot runs what systemd runs on a Debian cloud image, in the same order; on an Ignition
// image, Ignition's first boot comes before it and cloud-init is not there.
func (m *manager) boot(cfg *Config, l *log.Logger, start time.Time) {
	ignition := cfg.Provisioner == ProvisionerIgnition
	if ignition {
		if err := m.firstBootIgnition(cfg, l); err != nil {
			// Ignition's failure stops a real boot in the initramfs (emergency target).
			l.Printf("Ignition failed: %v", err)
			_ = writeFile(ignitionFailedFile, err.Error()+"\n", 0o644)
			l.Printf("Boot stopped: Ignition did not complete (nothing of the image started)")
			return
		}
	}
	applyTmpfiles(l)
	applySysctls(l)
	if b, err := os.ReadFile("/etc/hostname"); err == nil {
		if name := strings.TrimSpace(string(b)); name != "" {
			_ = syscall.Sethostname([]byte(name))
		}
	}
	if _, err := m.output("ip", "link", "set", "lo", "up"); err != nil {
		l.Printf("Bringing lo up: %v", err)
	}
	for _, n := range cfg.NICs {
		if _, err := net.InterfaceByName(n.Name); err != nil {
			l.Printf("NIC %s (%s) is missing: %v", n.Name, n.MAC, err)
		}
	}
	units := bootUnits
	if ignition {
		if err := writeNMInterfaces(cfg.NICs, l); err != nil {
			l.Printf("Network configuration: %v", err)
		}
		units = []string{"networking.service"}
	}
	for _, u := range units {
		if err := m.start(u); err != nil {
			l.Printf("Boot unit %s: %v", u, err)
		}
	}
	wants := enabledUnits("multi-user.target")
	var oneshots []string
	for _, u := range wants {
		if containsStr(bootUnits, u) || u == finalUnit || ignition && isCloudInitUnit(u) {
			continue
		}
		s, err := m.load(u)
		if err != nil {
			l.Printf("Enabled unit %s: %v", u, err)
			continue
		}
		if m.unitOf(s).typ == "oneshot" {
			oneshots = append(oneshots, u)
			continue
		}
		if err := m.start(u); err != nil {
			l.Printf("Starting %s: %v", u, err)
		}
	}
	for _, u := range oneshots {
		if err := m.start(u); err != nil {
			l.Printf("Starting %s: %v", u, err)
		}
	}
	l.Printf("Reached multi-user.target (%s)", time.Since(start).Round(time.Millisecond))
	if !ignition {
		if err := m.start(finalUnit); err != nil {
			l.Printf("Boot unit %s: %v", finalUnit, err)
		}
	}
	_ = os.WriteFile("/run/guest-init/booted", []byte(time.Now().UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
	l.Printf("Boot finished (%s)", time.Since(start).Round(time.Millisecond))
}

// isCloudInitUnit reports whether a unit is cloud-init's (absent from an Ignition image).
func isCloudInitUnit(u string) bool {
	return strings.HasPrefix(u, "cloud-init") || strings.HasPrefix(u, "cloud-config") || strings.HasPrefix(u, "cloud-final")
}

// firstBootIgnition runs Ignition on the first boot of the disk: the config is the config
// drive's user data (the Engine's Ignition config). Later boots find its result file.
func (m *manager) firstBootIgnition(cfg *Config, l *log.Logger) error {
	if _, err := os.Stat(IgnitionResultFile); err == nil {
		l.Printf("Ignition: not the first boot (%s exists)", IgnitionResultFile)
		return nil
	}
	data, ok := cfg.ConfigDrive[ignitionUserData]
	if !ok {
		return ignFail("no Ignition config: this first boot has no config drive with %s (oVirt attaches one on the first run of a VM with an initialization)", ignitionUserData)
	}
	start := time.Now()
	if err := applyIgnition("/", []byte(data), l, m.output); err != nil {
		return err
	}
	result := fmt.Sprintf("{\"provisioningDate\":%q,\"userConfigProvided\":true}\n", time.Now().UTC().Format(time.RFC3339Nano))
	if err := writeFile(IgnitionResultFile, result, 0o644); err != nil {
		return ignFail("writing %s: %v", IgnitionResultFile, err)
	}
	l.Printf("Ignition: config applied (%s)", time.Since(start).Round(time.Millisecond))
	return nil
}

// ignitionUserData is where Ignition's oVirt/OpenStack provider reads the config on the
// config drive.
const ignitionUserData = "openstack/latest/user_data"

// enabledUnits lists the units linked into a target's wants directories.
func enabledUnits(target string) []string {
	seen := map[string]bool{}
	for _, d := range unitDirs {
		entries, _ := os.ReadDir(filepath.Join(d, target+".wants"))
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".service") && !isMasked(e.Name()) {
				seen[e.Name()] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// applyTmpfiles creates the directories of tmpfiles.d's "d" and "D" lines (what
// systemd-tmpfiles --create does at boot for the file systems that start empty: /run, /tmp).
func applyTmpfiles(l *log.Logger) {
	var files []string
	for _, d := range []string{"/usr/lib/tmpfiles.d", "/etc/tmpfiles.d", "/run/tmpfiles.d"} {
		m, _ := filepath.Glob(filepath.Join(d, "*.conf"))
		files = append(files, m...)
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 || (fields[0] != "d" && fields[0] != "D") || strings.Contains(fields[1], "%") {
				continue
			}
			if !strings.HasPrefix(fields[1], "/run/") && !strings.HasPrefix(fields[1], "/tmp/") {
				continue
			}
			mode := os.FileMode(0o755)
			if len(fields) > 2 && fields[2] != "-" {
				var v uint32
				if _, err := fmt.Sscanf(fields[2], "%o", &v); err == nil {
					mode = os.FileMode(v)
				}
			}
			if err := os.MkdirAll(fields[1], mode); err != nil {
				l.Printf("tmpfiles %s: %v", fields[1], err)
			}
		}
		fh.Close()
	}
}

// applySysctls applies the net.* keys of sysctl.d (per network namespace, so the guest's own);
// every other key is global to the host's kernel and is left alone.
func applySysctls(l *log.Logger) {
	var files []string
	for _, d := range []string{"/usr/lib/sysctl.d", "/etc/sysctl.d"} {
		m, _ := filepath.Glob(filepath.Join(d, "*.conf"))
		files = append(files, m...)
	}
	files = append(files, "/etc/sysctl.conf")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(strings.TrimPrefix(k, "-")), strings.TrimSpace(v)
			if !strings.HasPrefix(k, "net.") {
				continue
			}
			p := filepath.Join("/proc/sys", strings.ReplaceAll(k, ".", "/"))
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				l.Printf("sysctl %s=%s (%s): %v", k, v, f, err)
			}
		}
	}
}

// isMasked reports whether a unit is masked in any unit directory.
func isMasked(name string) bool {
	for _, d := range unitDirs {
		if masked(filepath.Join(d, name)) {
			return true
		}
	}
	return false
}
