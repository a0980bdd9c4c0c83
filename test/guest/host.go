//go:build linux

package guest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capov/capov/test/guest/initd"
)

// cgroupPrefix names the cgroup, in every hierarchy, under which a Host's guests get their
// subtrees: the prefix and the PID of the process that runs the Host. A tree whose process is
// gone is what a killed run left; NewHost kills what runs there and removes it.
const cgroupPrefix = "capov-guests-"

// KubeletSysctls are the global sysctls the kubelet sets unless they already have these
// values (kubelet's setupKernelTunables): a guest sees them, and nf_conntrack_max (which
// kube-proxy sets), through files of its own, so that no guest changes the host's kernel.
var KubeletSysctls = map[string]string{
	"vm.overcommit_memory":      "1",
	"vm.panic_on_oom":           "0",
	"kernel.panic":              "10",
	"kernel.panic_on_oops":      "1",
	"kernel.keys.root_maxkeys":  "1000000",
	"kernel.keys.root_maxbytes": "25000000",
}

// guestSysctls are the global sysctls a guest gets files of its own for: the kubelet's, and
// nf_conntrack_max at the host's value (a guest's kernel default).
func guestSysctls() map[string]string {
	m := make(map[string]string, len(KubeletSysctls)+1)
	for k, v := range KubeletSysctls {
		m[k] = v
	}
	if b, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max"); err == nil {
		m["net.netfilter.nf_conntrack_max"] = strings.TrimSpace(string(b))
	}
	return m
}

// HostOptions configure a Host.
type HostOptions struct {
	// Dir holds one directory per VM: its disk, boot configuration and console log.
	Dir string
	// Template is the base image.
	Template *Template
	// GuestInit is the guest-init binary (test/guest/cmd/guest-init).
	GuestInit string
	// Bridge is the lab bridge the guests' NICs are plugged into.
	Bridge string
	// StopTimeout bounds each service's stop when a guest shuts down (default 20s).
	StopTimeout time.Duration
	// Log receives what the host cannot return to a caller (nil: discarded).
	Log func(string)
	// OnExit is called when a guest's init exits (shut down from inside, crashed, or stopped
	// by the host): the VM is powered off. It must not call back into the Host synchronously.
	OnExit func(vmID string, err error)
}

// Host runs the guests of VMs. Its methods are safe for concurrent use.
type Host struct {
	o  HostOptions
	mu sync.Mutex
	// running guests by VM id.
	guests map[string]*running
}

// running is a guest whose init runs.
type running struct {
	pid    int
	nics   []string // host ends of the veths
	exited chan struct{}
	err    error
}

// NIC is a network interface of a VM.
type NIC struct {
	MAC string
}

// BootRequest is a VM that powers on.
type BootRequest struct {
	VMID string
	NICs []NIC
	// ConfigDrive is the Engine's payload for this start (first run only): files by path
	// relative to the drive's root. Nil: no drive attached.
	ConfigDrive map[string]string
	// Ignition boots the template as an Ignition image (RHCOS, Fedora CoreOS, Flatcar): Ignition
	// applies the config drive's user data on the disk's first boot, and cloud-init does not run.
	Ignition bool
}

// NewHost returns a Host. It removes the cgroups that killed runs left behind.
func NewHost(o HostOptions) (*Host, error) {
	if o.Dir == "" || o.Template == nil || o.GuestInit == "" || o.Bridge == "" {
		return nil, errors.New("guest host: Dir, Template, GuestInit and Bridge are required")
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = 20 * time.Second
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := removeStaleCgroups(); err != nil {
		return nil, err
	}
	return &Host{o: o, guests: map[string]*running{}}, nil
}

// vmDir is the VM's directory, and disk its disk.
func (h *Host) vmDir(id string) string { return filepath.Join(h.o.Dir, id) }

// ConsoleLog is the path of a VM's console log: guest-init's own output.
func (h *Host) ConsoleLog(id string) string { return filepath.Join(h.vmDir(id), "console.log") }

// Disk is the path of a VM's disk directory (the guest's files are under root-upper).
func (h *Host) Disk(id string) string { return filepath.Join(h.vmDir(id), "disk") }

// runningIDs lists the VMs whose guests run.
func (h *Host) runningIDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.guests))
	for id, r := range h.guests {
		if r != nil {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// logf reports what the host cannot return to a caller.
func (h *Host) logf(format string, args ...any) {
	if h.o.Log != nil {
		h.o.Log(fmt.Sprintf(format, args...))
	}
}

// Running reports whether the VM's guest runs.
func (h *Host) Running(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.guests[id]
	return ok
}

// Boot starts the guest of a VM that powers on.
func (h *Host) Boot(ctx context.Context, req BootRequest) error {
	h.mu.Lock()
	if _, ok := h.guests[req.VMID]; ok {
		h.mu.Unlock()
		return fmt.Errorf("guest %s runs already", req.VMID)
	}
	h.guests[req.VMID] = nil // reserved
	h.mu.Unlock()
	r, err := h.boot(ctx, req)
	h.mu.Lock()
	if err != nil {
		delete(h.guests, req.VMID)
	} else {
		h.guests[req.VMID] = r
	}
	h.mu.Unlock()
	return err
}

func (h *Host) boot(ctx context.Context, req BootRequest) (*running, error) {
	dir := h.vmDir(req.VMID)
	if err := os.MkdirAll(h.Disk(req.VMID), 0o755); err != nil {
		return nil, err
	}
	cfg := &initd.Config{
		VMID: req.VMID, Base: h.o.Template.Root, UsrLayers: []string{h.o.Template.Usr, "/usr"},
		Disk: h.Disk(req.VMID), ConfigDrive: req.ConfigDrive, KernelSysctls: guestSysctls(),
		StopTimeout: initd.Duration{Duration: h.o.StopTimeout}, Provisioner: initd.ProvisionerCloudInit,
	}
	if req.Ignition {
		cfg.Provisioner = initd.ProvisionerIgnition
	}
	for i, n := range req.NICs {
		cfg.NICs = append(cfg.NICs, initd.NIC{Name: "eth" + strconv.Itoa(i), MAC: n.MAC})
	}
	cfgPath := filepath.Join(dir, "boot.json")
	if err := initd.WriteConfig(cfgPath, cfg); err != nil {
		return nil, err
	}
	cg, err := newCgroup(req.VMID)
	if err != nil {
		return nil, err
	}
	console, err := os.OpenFile(h.ConsoleLog(req.VMID), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer console.Close()
	fmt.Fprintf(console, "=== power on %s ===\n", time.Now().UTC().Format(time.RFC3339Nano))
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer syncW.Close()
	cmd := exec.Command(h.o.GuestInit, "start", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = console, console
	cmd.ExtraFiles = []*os.File{syncR}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC,
		// No Pdeathsig: it follows the thread that forked, and Go ends threads (Interfaces
		// ends its locked one), which would power guests off at random.
		Setsid: true,
	}
	if err := cmd.Start(); err != nil {
		syncR.Close()
		return nil, fmt.Errorf("starting guest-init: %w", err)
	}
	syncR.Close()
	r := &running{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		r.err = err
		cg.remove()
		for _, n := range r.nics {
			_ = exec.Command("ip", "link", "del", n).Run() // gone with the namespace, normally
		}
		h.mu.Lock()
		if h.guests[req.VMID] == r {
			delete(h.guests, req.VMID)
		}
		h.mu.Unlock()
		close(r.exited)
		if h.o.OnExit != nil {
			h.o.OnExit(req.VMID, err)
		}
	}()
	fail := func(err error) (*running, error) {
		_, _ = syncW.Write([]byte{'x'})
		_ = syscall.Kill(r.pid, syscall.SIGKILL)
		<-r.exited
		return nil, err
	}
	if err := cg.add(r.pid); err != nil {
		return fail(err)
	}
	for i, n := range cfg.NICs {
		host := vethName(req.VMID, i)
		if out, err := exec.CommandContext(ctx, "ip", "link", "add", host, "type", "veth", "peer", "name", n.Name,
			"address", n.MAC, "netns", strconv.Itoa(r.pid)).CombinedOutput(); err != nil {
			return fail(fmt.Errorf("plugging NIC %s (%s): %w: %s", n.Name, n.MAC, err, out))
		}
		r.nics = append(r.nics, host)
		if out, err := exec.CommandContext(ctx, "ip", "link", "set", host, "master", h.o.Bridge, "up").CombinedOutput(); err != nil {
			return fail(fmt.Errorf("plugging NIC %s into %s: %w: %s", n.Name, h.o.Bridge, err, out))
		}
	}
	if _, err := syncW.Write([]byte{'g'}); err != nil {
		return fail(fmt.Errorf("releasing guest-init: %w", err))
	}
	return r, nil
}

// vethName is the host end of a VM's NIC: at most 15 characters, stable per VM and NIC.
func vethName(vmID string, i int) string {
	sum := sha256.Sum256([]byte(vmID))
	return "vm" + hex.EncodeToString(sum[:])[:10] + "n" + strconv.Itoa(i)
}

// Shutdown asks the guest to shut down (ACPI power button: SIGTERM to its init) and waits
// until it has, or until timeout, then powers it off.
func (h *Host) Shutdown(id string, timeout time.Duration) {
	h.mu.Lock()
	r := h.guests[id]
	h.mu.Unlock()
	if r == nil {
		return
	}
	_ = syscall.Kill(r.pid, syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(timeout):
		h.PowerOff(id)
	}
}

// PowerOff stops the guest at once: SIGKILL to its init, which takes every process of its PID
// namespace with it; it returns when the guest is gone.
func (h *Host) PowerOff(id string) {
	h.mu.Lock()
	r := h.guests[id]
	h.mu.Unlock()
	if r == nil {
		return
	}
	_ = syscall.Kill(r.pid, syscall.SIGKILL)
	<-r.exited
}

// Remove powers the guest off and wipes the VM's disk.
func (h *Host) Remove(id string) error {
	h.PowerOff(id)
	return os.RemoveAll(h.vmDir(id))
}

// Close powers every guest off and removes this process's cgroup trees (capov-guests-<pid>),
// empty once the guests are gone.
func (h *Host) Close() {
	h.mu.Lock()
	ids := make([]string, 0, len(h.guests))
	for id := range h.guests {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	for _, id := range ids {
		h.PowerOff(id)
	}
	for _, m := range cgroupHierarchies() {
		if err := os.Remove(filepath.Join(m, cgroupPrefix+strconv.Itoa(os.Getpid()))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.logf("removing the guests' cgroup tree in %s: %v", m, err)
		}
	}
}

// Interface is what a guest agent reports of one interface.
type Interface struct {
	Name string
	MAC  string
	IPs  []string
}

// Interfaces reads the guest's interfaces and addresses from its network namespace, as the
// qemu guest agent reports them (lo included).
func (h *Host) Interfaces(id string) ([]Interface, error) {
	h.mu.Lock()
	r := h.guests[id]
	h.mu.Unlock()
	if r == nil {
		return nil, fmt.Errorf("guest %s does not run", id)
	}
	type result struct {
		ifs []Interface
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The thread enters the guest's network namespace and is never used again: a locked
		// goroutine that ends without unlocking ends its thread.
		runtime.LockOSThread()
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", r.pid))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("entering the network namespace of guest %s: %w", id, err)}
			return
		}
		ifs, err := net.Interfaces()
		if err != nil {
			ch <- result{err: err}
			return
		}
		var out []Interface
		for _, i := range ifs {
			addrs, _ := i.Addrs()
			it := Interface{Name: i.Name, MAC: i.HardwareAddr.String()}
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok {
					it.IPs = append(it.IPs, ipn.IP.String())
				}
			}
			out = append(out, it)
		}
		ch <- result{ifs: out}
	}()
	res := <-ch
	return res.ifs, res.err
}

// cgroup is a guest's subtree, the same path in every hierarchy.
type cgroup struct{ dirs []string }

// cgroupHierarchies are the mount points of the cgroup hierarchies.
func cgroupHierarchies() []string {
	mounts, _ := filepath.Glob("/sys/fs/cgroup/*")
	var out []string
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, "cgroup.procs")); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// newCgroup creates <hierarchy>/capov-guests-<pid>/<vm> in every mounted hierarchy.
func newCgroup(vmID string) (*cgroup, error) {
	parent := cgroupPrefix + strconv.Itoa(os.Getpid())
	cg := &cgroup{}
	for _, m := range cgroupHierarchies() {
		for _, d := range []string{filepath.Join(m, parent), filepath.Join(m, parent, vmID)} {
			if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("creating cgroup %s: %w", d, err)
			}
			if strings.HasSuffix(m, "/cpuset") {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if b, err := os.ReadFile(filepath.Join(d, f)); err == nil && strings.TrimSpace(string(b)) != "" {
						continue
					}
					v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f))
					if err != nil {
						return nil, err
					}
					if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
						return nil, err
					}
				}
			}
		}
		cg.dirs = append(cg.dirs, filepath.Join(m, parent, vmID))
	}
	return cg, nil
}

// add moves a process into the subtree of every hierarchy.
func (c *cgroup) add(pid int) error {
	for _, d := range c.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving guest-init into %s: %w", d, err)
		}
	}
	return nil
}

// remove deletes the subtree, deepest first, once its processes are gone.
func (c *cgroup) remove() {
	for _, d := range c.dirs {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, p := range dirs {
			for i := 0; i < 50; i++ {
				if err := os.Remove(p); err == nil || errors.Is(err, fs.ErrNotExist) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// alive reports whether a process exists and is not a zombie (a killed owner whose parent is
// gone stays a zombie until init reaps it).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndex(s, ") ")
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// removeStaleCgroups kills what runs in the guest trees of processes that are gone and removes
// those trees.
func removeStaleCgroups() error {
	for _, m := range cgroupHierarchies() {
		trees, _ := filepath.Glob(filepath.Join(m, cgroupPrefix+"*"))
		for _, t := range trees {
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(t), cgroupPrefix))
			if err != nil || pid == os.Getpid() || alive(pid) {
				continue
			}
			c := &cgroup{dirs: []string{t}}
			c.killAll()
			c.remove()
		}
	}
	return nil
}

// killAll SIGKILLs every process in the subtree until none is left (bounded).
func (c *cgroup) killAll() {
	for i := 0; i < 100; i++ {
		n := 0
		for _, d := range c.dirs {
			_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
				if err != nil {
					return fs.SkipDir // gone meanwhile
				}
				if !e.IsDir() {
					return nil
				}
				b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						n++
					}
				}
				return nil
			})
		}
		if n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
