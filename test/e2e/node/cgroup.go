//go:build linux

package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupPrefix names the node's cgroup subtrees: cgroupPrefix + the PID of the process that
// built the node. A subtree whose process is gone is a leftover of a killed run, which Up
// removes; concurrent runs (other work trees) keep theirs.
const cgroupPrefix = "capov-e2e-"

// cgroupTree is the node's subtree, the same path in every mounted hierarchy (cgroup v1
// controllers, named hierarchies, and the v2 unified one of a hybrid host). The components run
// in <name>/components; the kubelet's cgroupRoot is <name>, so pods go to <name>/kubepods.
// Nothing outside the subtree is created or changed.
type cgroupTree struct {
	name   string   // "capov-e2e-1234"
	mounts []string // hierarchy mount points, e.g. /sys/fs/cgroup/memory
}

// componentsDir is where the node's processes are placed, below the tree.
const componentsDir = "components"

// cgroupMounts lists the mount points of the cgroup hierarchies this process sees.
func cgroupMounts() ([]string, error) {
	entries, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.fsType == "cgroup" || e.fsType == "cgroup2" {
			out = append(out, e.mountPoint)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return out, nil
}

// newCgroupTree creates the subtree of this process in every hierarchy.
func newCgroupTree() (*cgroupTree, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	t := &cgroupTree{name: cgroupPrefix + strconv.Itoa(os.Getpid()), mounts: mounts}
	for _, m := range mounts {
		for _, rel := range []string{t.name, filepath.Join(t.name, componentsDir)} {
			dir := filepath.Join(m, rel)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return t, fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			// A v1 cpuset cgroup takes no task before it has CPUs and memory nodes.
			if isV1Cpuset(m) {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
					if err != nil {
						return t, fmt.Errorf("reading %s of the parent of %s: %w", f, dir, err)
					}
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return t, fmt.Errorf("writing %s of %s: %w", f, dir, err)
					}
				}
			}
		}
	}
	return t, nil
}

// path is the subtree's directory in the hierarchy mounted at m.
func (t *cgroupTree) path(m string) string { return filepath.Join(m, t.name) }

// add moves a process into <tree>/components of every hierarchy. Its later children inherit.
func (t *cgroupTree) add(pid int) error {
	var errs []error
	for _, m := range t.mounts {
		procs := filepath.Join(t.path(m), componentsDir, "cgroup.procs")
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("moving PID %d into %s: %w", pid, procs, err))
		}
	}
	return errors.Join(errs...)
}

// pids lists every process in the subtree, in any hierarchy.
func (t *cgroupTree) pids() []int {
	seen := map[int]bool{}
	for _, m := range t.mounts {
		_ = filepath.WalkDir(t.path(m), func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				// A cgroup removed during the walk, or a hierarchy without the subtree.
				return fs.SkipDir
			case !d.IsDir():
				return nil
			}
			if b, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						seen[pid] = true
					}
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// killAll kills every process of the subtree (components, shims, and container processes
// that the shims left orphaned, which would otherwise keep the namespaces alive) and waits
// until none is left. The v1 freezer, when mounted, stops forks racing the kill.
func (t *cgroupTree) killAll(ctx context.Context) error {
	freezer := ""
	for _, m := range t.mounts {
		if fileExists(filepath.Join(t.path(m), "freezer.state")) {
			freezer = filepath.Join(t.path(m), "freezer.state")
		}
	}
	for {
		pids := t.pids()
		if len(pids) == 0 {
			return nil
		}
		if freezer != "" {
			_ = os.WriteFile(freezer, []byte("FROZEN"), 0o644)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if freezer != "" {
			_ = os.WriteFile(freezer, []byte("THAWED"), 0o644)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("killing the processes of cgroup %s (left: %v): %w", t.name, t.pids(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// remove deletes the subtree in every hierarchy, deepest directories first. A v1 cgroup
// can be removed only once its last task is reaped, hence the retries.
func (t *cgroupTree) remove(ctx context.Context) error {
	for {
		var errs []error
		for _, m := range t.mounts {
			if err := removeCgroupDir(t.path(m)); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing cgroup %s: %w", t.name, errors.Join(append(errs, ctx.Err())...))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// removeCgroupDir removes a cgroup directory and its child cgroups (rmdir only: the files in
// a cgroup directory are the kernel's).
func removeCgroupDir(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// removeStaleCgroups kills and removes the subtrees of runs whose process is gone (a run
// killed before its teardown). It returns the names it removed.
func removeStaleCgroups(ctx context.Context) ([]string, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	stale := map[string]bool{}
	for _, m := range mounts {
		entries, err := os.ReadDir(m)
		if err != nil {
			continue
		}
		for _, e := range entries {
			pidText, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
			if !ok || !e.IsDir() {
				continue
			}
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid == os.Getpid() || processAlive(pid) {
				continue
			}
			stale[e.Name()] = true
		}
	}
	var names []string
	var errs []error
	for name := range stale {
		t := &cgroupTree{name: name, mounts: mounts}
		if err := t.killAll(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := t.remove(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, errors.Join(errs...)
}

// isV1Cpuset tells whether the hierarchy mounted at m is a cgroup v1 one with the cpuset
// controller (a v2 root has cgroup.controllers and no cpuset.cpus).
func isV1Cpuset(m string) bool {
	return fileExists(filepath.Join(m, "cpuset.cpus")) && !fileExists(filepath.Join(m, "cgroup.controllers"))
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
