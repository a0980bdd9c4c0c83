//go:build linux

package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// WrapperHint is what to run instead, printed by every refusal of CheckIsolation.
const WrapperHint = "run it through the wrapper, as root: make e2e, or hack/e2e.sh ./test/e2e/... [-run REGEXP]"

// CheckIsolation returns an error unless this process may build a node without touching the
// host: it must be root, in a network namespace and a mount namespace of its own (not those of
// PID 1), and none of its mounts may be a peer of a mount of PID 1 (a new mount would then
// propagate to the host). The host's namespaces are those of PID 1 or of kthreadd
// (hostReferences). hack/e2e.sh runs the tests under
// `unshare --net --mount --propagation private --fork`, which satisfies all of it.
func CheckIsolation() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the e2e node needs root and Linux namespaces (unshare); %s", WrapperHint)
	}
	refs, err := hostReferences()
	if err != nil {
		return err
	}
	hostGroups := map[int]string{}
	for _, ref := range refs {
		for _, ns := range []string{"net", "mnt"} {
			self, err := os.Readlink("/proc/self/ns/" + ns)
			if err != nil {
				return fmt.Errorf("reading the %s namespace: %w", ns, err)
			}
			host, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", ref, ns))
			if err != nil {
				return fmt.Errorf("reading the %s namespace of PID %d: %w", ns, ref, err)
			}
			if self == host {
				return fmt.Errorf("refusing to build the e2e node in the host's %s namespace (%s, that of PID %d): it would change the host's interfaces, routes, firewall or mounts; %s", ns, self, ref, WrapperHint)
			}
		}
		groups, err := sharedPeerGroups(fmt.Sprintf("/proc/%d/mountinfo", ref))
		if err != nil {
			return err
		}
		for g, mp := range groups {
			hostGroups[g] = mp
		}
	}
	ours, err := sharedPeerGroups("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for g, mp := range ours {
		if hostMP, ok := hostGroups[g]; ok {
			return fmt.Errorf("refusing to build the e2e node: the mount %s shares propagation (peer group %d) with the host's %s, so new mounts would appear on the host; unshare with --propagation private; %s", mp, g, hostMP, WrapperHint)
		}
	}
	return nil
}

// hostReferences are the processes whose namespaces are the host's: PID 1, and kthreadd
// (PID 2, a kernel thread, always in the initial namespaces), which is the one readable on
// machines where PID 1 holds capabilities this process lacks (then reading its namespaces is
// denied even to root).
func hostReferences() ([]int, error) {
	var refs []int
	if _, err := os.Readlink("/proc/1/ns/net"); err == nil {
		refs = append(refs, 1)
	}
	if comm, err := os.ReadFile("/proc/2/comm"); err == nil && strings.TrimSpace(string(comm)) == "kthreadd" {
		if _, err := os.Readlink("/proc/2/ns/net"); err == nil {
			refs = append(refs, 2)
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("cannot read the namespaces of PID 1 or of kthreadd, so cannot tell whether this process is isolated from the host; %s", WrapperHint)
	}
	return refs, nil
}

// sharedPeerGroups maps the shared peer-group ids of a mountinfo file to a mount point of each.
func sharedPeerGroups(mountinfo string) (map[int]string, error) {
	entries, err := readMountinfo(mountinfo)
	if err != nil {
		return nil, err
	}
	groups := map[int]string{}
	for _, e := range entries {
		if e.shared != 0 {
			groups[e.shared] = e.mountPoint
		}
	}
	return groups, nil
}

// mountEntry is one line of /proc/<pid>/mountinfo, the fields this package uses.
type mountEntry struct {
	mountPoint string
	fsType     string
	shared     int // the N of an optional "shared:N" field; 0 when the mount is not shared
}

func readMountinfo(path string) ([]mountEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 6 {
			continue
		}
		e := mountEntry{mountPoint: unescapeMountinfo(fields[4])}
		for _, opt := range fields[6:] {
			if n, ok := strings.CutPrefix(opt, "shared:"); ok {
				e.shared, _ = strconv.Atoi(n)
			}
		}
		if pf := strings.Fields(post); len(pf) > 0 {
			e.fsType = pf[0]
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// tmpfsDirs get a tmpfs of their own inside the private mount namespace: /run holds
// containerd's state (1.6 puts its shim sockets under /run/containerd/s whatever its config),
// the CRI's network-namespace files and iptables' lock; the kubelet ignores --root-dir for its
// device-plugin directory (/var/lib/kubelet/device-plugins); CNI caches results in /var/lib/cni.
func tmpfsDirs() []string { return []string{"/run", "/var/lib/kubelet", "/var/lib/cni"} }

// kubeletSysctls are the kernel settings the kubelet would write (and, with
// protectKernelDefaults, requires). They are global, so they are never written: a read-only
// file holding the expected value is bind-mounted over each that differs, inside the private
// mount namespace only.
func kubeletSysctls() map[string]string {
	return map[string]string{
		"vm/overcommit_memory":      "1",
		"vm/panic_on_oom":           "0",
		"kernel/panic":              "10",
		"kernel/panic_on_oops":      "1",
		"kernel/keys/root_maxkeys":  "1000000",
		"kernel/keys/root_maxbytes": "25000000",
	}
}

// mountSet records what setupMounts did, for teardown.
type mountSet struct {
	mounted []string       // in mount order
	before  map[string]int // mount points (and how many mounts each) before setupMounts
}

// setupMounts makes the private mount namespace usable by a node: mounts shared within it
// (the kubelet and containerd need propagation between their mounts), the tmpfs mounts and the
// sysctl stand-ins. A tmpfs directory missing on the host (/var/lib/kubelet on a machine that
// never ran a kubelet) is not created there: its nearest existing parent gets an overlay whose
// lower layer is the host's directory and whose upper layer is below workDir, so the host's
// file system stays as it was, even for a concurrent run. CheckIsolation must have passed.
func setupMounts(workDir, fakeDir string) (*mountSet, error) {
	entries, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	m := &mountSet{before: map[string]int{}}
	for _, e := range entries {
		m.before[e.mountPoint]++
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SHARED, ""); err != nil {
		return m, fmt.Errorf("making / rshared in the private mount namespace: %w", err)
	}
	overlaid := map[string]bool{}
	for _, d := range tmpfsDirs() {
		if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
			parent := filepath.Dir(d)
			for !fileExists(parent) {
				parent = filepath.Dir(parent)
			}
			if !overlaid[parent] {
				if err := m.overlay(parent, filepath.Join(workDir, "overlay", strings.ReplaceAll(strings.Trim(parent, "/"), "/", "_"))); err != nil {
					return m, err
				}
				overlaid[parent] = true
			}
			if err := os.MkdirAll(d, 0o755); err != nil {
				return m, fmt.Errorf("creating %s in the overlay of %s: %w", d, parent, err)
			}
		}
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
			return m, fmt.Errorf("mounting a tmpfs on %s: %w", d, err)
		}
		m.mounted = append(m.mounted, d)
	}
	if err := os.MkdirAll(fakeDir, 0o755); err != nil {
		return m, fmt.Errorf("creating %s: %w", fakeDir, err)
	}
	sysctls := kubeletSysctls()
	names := make([]string, 0, len(sysctls))
	for k := range sysctls {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		want := sysctls[name]
		target := "/proc/sys/" + name
		cur, err := os.ReadFile(target)
		if err != nil {
			return m, fmt.Errorf("reading %s: %w", target, err)
		}
		if strings.TrimSpace(string(cur)) == want {
			continue
		}
		fake := filepath.Join(fakeDir, strings.ReplaceAll(name, "/", "."))
		if err := os.WriteFile(fake, []byte(want+"\n"), 0o444); err != nil {
			return m, fmt.Errorf("writing %s: %w", fake, err)
		}
		if err := syscall.Mount(fake, target, "", syscall.MS_BIND, ""); err != nil {
			return m, fmt.Errorf("bind-mounting %s over %s: %w", fake, target, err)
		}
		m.mounted = append(m.mounted, target)
		if err := syscall.Mount("", target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return m, fmt.Errorf("making %s read-only: %w", target, err)
		}
	}
	return m, nil
}

// overlay mounts over dir an overlay of itself with its upper layer in state.
func (m *mountSet) overlay(dir, state string) error {
	upper, work := filepath.Join(state, "upper"), filepath.Join(state, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", dir, upper, work)
	if err := syscall.Mount("overlay", dir, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mounting an overlay on %s (%s): %w", dir, opts, err)
	}
	m.mounted = append(m.mounted, dir)
	return nil
}

// teardown unmounts everything below the given roots (container root file systems, the CRI's
// network-namespace files, the kubelet's volumes), then what setupMounts mounted. Lazy
// unmounts: nothing of the node runs any more.
func (m *mountSet) teardown(roots ...string) error {
	var errs []error
	entries, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		errs = append(errs, err)
	}
	all := append(append([]string{}, roots...), m.mounted...)
	var below []string
	for _, e := range entries {
		for _, r := range all {
			if e.mountPoint != r && strings.HasPrefix(e.mountPoint, strings.TrimSuffix(r, "/")+"/") {
				below = append(below, e.mountPoint)
				break
			}
		}
	}
	// Deepest first.
	sort.Slice(below, func(i, j int) bool { return len(below[i]) > len(below[j]) })
	for _, mp := range below {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
		}
	}
	for i := len(m.mounted) - 1; i >= 0; i-- {
		if err := syscall.Unmount(m.mounted[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m.mounted[i], err))
		}
	}
	m.mounted = nil
	return errors.Join(errs...)
}

// Names of the node's interfaces in the private network namespace. The kernel of the
// project's machines has no dummy device, so the node IP sits on one end of a veth pair.
const (
	nodeLink = "e2e0"
	peerLink = "e2e1"
	cniLink  = "cni0"
)

// setupNetwork gives the private network namespace a loopback, the node IP on a veth and a
// default route through it, and turns on forwarding and bridge netfilter, which are per network
// namespace on these kernels. CheckIsolation must have passed.
func setupNetwork(ctx context.Context, nodeIP string) error {
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", nodeLink, "type", "veth", "peer", "name", peerLink},
		{"addr", "add", nodeIP + "/24", "dev", nodeLink},
		{"link", "set", nodeLink, "up"},
		{"link", "set", peerLink, "up"},
		// A gateway nobody answers for: traffic to anything outside the node fails at once
		// instead of looping between the two ends of the pair.
		{"route", "add", "default", "via", gatewayOf(nodeIP), "dev", nodeLink},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return err
		}
	}
	for _, s := range []struct{ path, value string }{
		{"/proc/sys/net/ipv4/ip_forward", "1"},
		{"/proc/sys/net/bridge/bridge-nf-call-iptables", "1"},
		{"/proc/sys/net/bridge/bridge-nf-call-ip6tables", "1"},
	} {
		if err := os.WriteFile(s.path, []byte(s.value), 0o644); err != nil {
			return fmt.Errorf("setting %s in the private network namespace: %w", s.path, err)
		}
	}
	return nil
}

// teardownNetwork removes the interfaces and flushes the firewall tables of the private network
// namespace, so that another node can be built in the same process. (When the process ends,
// the namespace goes with it anyway.)
func teardownNetwork(ctx context.Context) error {
	var errs []error
	for _, l := range []string{cniLink, nodeLink} {
		if err := ip(ctx, "link", "del", l); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	for _, t := range []string{"filter", "nat", "mangle", "raw"} {
		for _, op := range []string{"-F", "-X"} {
			out, err := exec.CommandContext(ctx, "iptables", "-w", "5", "-t", t, op).CombinedOutput()
			if err != nil {
				errs = append(errs, fmt.Errorf("iptables -t %s %s: %w: %s", t, op, err, strings.TrimSpace(string(out))))
			}
		}
	}
	return errors.Join(errs...)
}

// gatewayOf is the .1 address of the node IP's /24.
func gatewayOf(nodeIP string) string {
	if i := strings.LastIndexByte(nodeIP, '.'); i > 0 {
		return nodeIP[:i] + ".1"
	}
	return nodeIP
}

func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
