//go:build linux

package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// process is one running component.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // set before done is closed
}

// componentEnv is the whole environment of the components: nothing of the caller's leaks in
// (KUBECONFIG, proxies, GODEBUG...).
func componentEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
}

// start runs a component in a session of its own (a signal to the caller's process group never
// reaches it), its output in <logs>/<name>.log, inside the node's cgroup subtree.
func (c *Cluster) start(name string, args ...string) error {
	logPath := filepath.Join(c.paths.logs, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	defer f.Close()
	cmd := exec.Command(c.bins[name], args...)
	cmd.Env = componentEnv()
	cmd.Dir = c.paths.work
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	if err := c.cgroup.add(cmd.Process.Pid); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.log.Info("Started component", "component", name, "pid", cmd.Process.Pid)
	return nil
}

// exited returns a component that has exited, if any.
func (c *Cluster) exited() *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		select {
		case <-p.done:
			return p
		default:
		}
	}
	return nil
}

// gracePeriod is how long Down waits for the components to exit after SIGTERM before it kills
// whatever is left in the cgroup subtree.
const gracePeriod = 5 * time.Second

// Down stops the node and removes everything it made: it sends SIGTERM to the node-side
// components at once, kills whatever is still in the cgroup subtree after they exit or after
// gracePeriod (pods, shims, and
// container processes the shims left orphaned), removes the subtree in every hierarchy,
// unmounts everything below the work directory and the tmpfs mounts, removes the interfaces
// and flushes the firewall of the private network namespace. It then checks that no process
// and no mount is left, and reports what it found. Safe to call more than once.
func (c *Cluster) Down(ctx context.Context) error {
	c.downOnce.Do(func() { c.downErr = c.down(ctx) })
	return c.downErr
}

func (c *Cluster) down(ctx context.Context) error {
	start := time.Now()
	var errs []error
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	// SIGTERM lets the node side (kubelet, kube-proxy, containerd, the controllers) finish its
	// logs; etcd and the API server keep nothing worth a graceful stop (etcd is on a tmpfs) and
	// would spend the whole grace period draining watches, so they are simply killed below.
	var graceful []*process
	for _, p := range procs {
		if p.name == "etcd" || p.name == "kube-apiserver" {
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		graceful = append(graceful, p)
	}
	grace := time.NewTimer(gracePeriod)
	defer grace.Stop()
wait:
	for _, p := range graceful {
		select {
		case <-p.done:
		case <-grace.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	var running []string
	for _, p := range graceful {
		select {
		case <-p.done:
		default:
			running = append(running, p.name)
		}
	}
	if len(running) > 0 {
		c.log.Info("Killing the components still running after SIGTERM", "components", running, "elapsed", time.Since(start).Round(time.Millisecond).String())
	}
	if c.cgroup != nil {
		killCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if err := c.cgroup.killAll(killCtx); err != nil {
			errs = append(errs, err)
		}
		// Every component is reaped before its cgroup can go.
		for _, p := range procs {
			select {
			case <-p.done:
			case <-killCtx.Done():
			}
		}
		if err := c.cgroup.remove(killCtx); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	if c.mounts != nil {
		if err := c.mounts.teardown(c.paths.work); err != nil {
			errs = append(errs, err)
		}
	}
	if c.netReady {
		if err := teardownNetwork(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.leftovers(); err != nil {
		errs = append(errs, err)
	}
	c.log.Info("Node down", "elapsed", time.Since(start).Round(time.Millisecond).String())
	if len(errs) > 0 {
		return fmt.Errorf("tearing down the node: %w", errors.Join(errs...))
	}
	return nil
}

// leftovers reports processes still in the cgroup subtree, cgroup directories still present
// and mounts that were not there before Up.
func (c *Cluster) leftovers() error {
	var found []string
	if c.cgroup != nil {
		if pids := c.cgroup.pids(); len(pids) > 0 {
			found = append(found, fmt.Sprintf("processes in cgroup %s: %v", c.cgroup.name, pids))
		}
		for _, m := range c.cgroup.mounts {
			if fileExists(c.cgroup.path(m)) {
				found = append(found, "cgroup "+c.cgroup.path(m))
			}
		}
	}
	entries, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	// Every mount of the namespace counts: it holds nothing but what was there before Up.
	now := map[string]int{}
	for _, e := range entries {
		now[e.mountPoint]++
	}
	for mp, n := range now {
		if c.mounts == nil || n > c.mounts.before[mp] {
			found = append(found, "mount "+mp)
		}
	}
	sort.Strings(found)
	if len(found) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(found, "; "))
	}
	return nil
}

// DumpLogs writes the last lines of every component log and of every pod log to w, for a
// failed test to show what the node was doing.
func (c *Cluster) DumpLogs(w io.Writer, lines int) {
	var files []string
	_ = filepath.WalkDir(c.paths.logs, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".log") {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	for _, f := range files {
		rel, _ := filepath.Rel(c.paths.logs, f)
		fmt.Fprintf(w, "----- %s (last %d lines; whole file: %s)\n%s\n", rel, lines, f, tail(f, lines))
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	// The last 256 KiB hold far more than the lines anybody asks for.
	if st, err := f.Stat(); err == nil && st.Size() > 256<<10 {
		_, _ = f.Seek(-256<<10, io.SeekEnd)
	}
	var ring []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		ring = append(ring, sc.Text())
		if len(ring) > n {
			ring = ring[1:]
		}
	}
	return strings.Join(ring, "\n")
}

// Memory reports the resident memory of the node's processes (components, shims, pods), from
// the cgroup subtree: total bytes and the largest processes by name.
func (c *Cluster) Memory() (total uint64, byName map[string]uint64) {
	byName = map[string]uint64{}
	if c.cgroup == nil {
		return 0, byName
	}
	for _, pid := range c.cgroup.pids() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		var name string
		var rss uint64
		for _, l := range bytes.Split(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(l, []byte("Name:")); ok {
				name = strings.TrimSpace(string(v))
			}
			if v, ok := bytes.CutPrefix(l, []byte("VmRSS:")); ok {
				_, _ = fmt.Sscanf(strings.TrimSpace(string(v)), "%d", &rss)
				rss *= 1024
			}
		}
		byName[name] += rss
		total += rss
	}
	return total, byName
}
