//go:build linux

package initd

import (
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// defaultPath is systemd's PATH for services.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// logDir is where each unit's output goes (under the manager's root), the guest's stand-in
// for the journal.
const logDir = "var/log/guest-init"

// errStopping is why a command of a unit that is being stopped is not started.
var errStopping = errors.New("the unit is being stopped")

// Unit states, as systemctl is-active prints them.
const (
	stateInactive     = "inactive"
	stateActivating   = "activating"
	stateActive       = "active"
	stateDeactivating = "deactivating"
	stateFailed       = "failed"
)

// manager runs the guest's units: it starts processes, reaps every child of PID 1 (services,
// their orphans, and whatever the guest's programs left behind), restarts services as their
// Restart= says and answers systemctl.
type manager struct {
	log         *log.Logger
	stopTimeout time.Duration
	root        string // "/" in a guest; a directory in tests

	mu       sync.Mutex
	services map[string]*service // by unit name, once loaded
	order    []string            // start order, for the reverse order at shutdown
	waiters  map[int]chan syscall.WaitStatus
	shutdown bool
	// commands is held by output while a command it waits for runs, and by the reaper while it
	// collects: a Wait4(-1) would otherwise take that command's exit before os/exec's Wait
	// does (ECHILD: "waitid: no child processes").
	commands sync.Mutex
}

// service is the state of one unit.
type service struct {
	// job serialises the jobs of one unit (start, stop, restart), as systemd's job queue
	// does: a stop asked while a restart runs takes effect after it, so the unit ends
	// stopped, never running behind a stop that has returned.
	job sync.Mutex

	u        *unit
	state    string
	pid      int
	stopping bool
	done     chan struct{} // closed when the current run (and its restarts) ended
	result   error         // why it failed
}

func newManager(l *log.Logger, stopTimeout time.Duration) *manager {
	return &manager{log: l, stopTimeout: stopTimeout, root: "/", services: map[string]*service{}, waiters: map[int]chan syscall.WaitStatus{}}
}

// reap collects every exited child of PID 1 and hands the status to whoever started it,
// until quit is closed.
func (m *manager) reap(quit <-chan struct{}) {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, syscall.SIGCHLD)
	defer signal.Stop(ch)
	for {
		select {
		case <-quit:
			return
		case <-ch:
		}
		m.commands.Lock()
		m.collect()
		m.commands.Unlock()
	}
}

// collect hands every exited child's status to whoever started it. Called with m.commands held.
func (m *manager) collect() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err != nil || pid <= 0 {
			break
		}
		m.mu.Lock()
		w, ok := m.waiters[pid]
		delete(m.waiters, pid)
		m.mu.Unlock()
		if ok {
			w <- ws
		}
	}
}

// output runs a command to its end and returns its combined output, the reaper held off
// meanwhile (see commands).
func (m *manager) output(name string, args ...string) ([]byte, error) {
	m.commands.Lock()
	defer m.commands.Unlock()
	return exec.Command(name, args...).CombinedOutput()
}

// spawn starts argv with env, output appended to the unit's log, in a process group of its
// own, and returns its PID and a channel that receives its exit status. The PID becomes the
// service's under the same lock that stop reads it with, and nothing is started once the
// service is being stopped (errStopping): a stop either sees the process and signals it, or
// no process starts after it.
func (m *manager) spawn(s *service, name string, argv, env []string, dir string) (int, <-chan syscall.WaitStatus, error) {
	logs := filepath.Join(m.root, logDir)
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return 0, nil, err
	}
	out, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, nil, err
	}
	defer out.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, nil, err
	}
	defer devnull.Close()
	path := argv[0]
	if !strings.Contains(path, "/") {
		if p, err := lookPath(path, env); err == nil {
			path = p
		}
	}
	fmt.Fprintf(out, "guest-init: %s: starting %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.Join(argv, " "))
	ch := make(chan syscall.WaitStatus, 1)
	// The lock spans the fork and the registration, so that the reaper, which needs it to
	// hand a status over, cannot lose the exit of a process that ended at once.
	m.mu.Lock()
	defer m.mu.Unlock()
	if s.stopping || m.shutdown {
		return 0, nil, errStopping
	}
	if dir == "" {
		dir = "/"
	}
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Dir: dir, Env: env, Files: []*os.File{devnull, out, out},
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return 0, nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	pid := p.Pid
	m.waiters[pid] = ch
	s.pid = pid
	_ = p.Release() // the reaper collects it: a Wait here would race with it
	return pid, ch, nil
}

// lookPath finds a command in the environment's PATH.
func lookPath(name string, env []string) (string, error) {
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in %s", name, path)
}

// load returns the service of a unit, reading it on first use (and after daemon-reload).
func (m *manager) load(name string) (*service, error) {
	m.mu.Lock()
	s, ok := m.services[name]
	m.mu.Unlock()
	if ok {
		return s, nil
	}
	u, err := loadUnit(m.root, name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.services[name]; ok {
		return s, nil
	}
	s = &service{u: u, state: stateInactive}
	m.services[name] = s
	return s, nil
}

// reload reads the unit files of the known units again, keeping their states
// (daemon-reload): a running unit keeps the definition it started with, its next start takes
// the new one. A unit whose file is gone or broken keeps its last definition.
func (m *manager) reload() {
	m.mu.Lock()
	names := make([]string, 0, len(m.services))
	for n := range m.services {
		names = append(names, n)
	}
	m.mu.Unlock()
	for _, n := range names {
		u, err := loadUnit(m.root, n)
		if err != nil {
			m.log.Printf("Reloading %s: %v", n, err)
			continue
		}
		m.mu.Lock()
		m.services[n].u = u
		m.mu.Unlock()
	}
}

// unitOf is the definition a service runs with now.
func (m *manager) unitOf(s *service) *unit {
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.u
}

// environ is the environment of a unit's processes.
func environ(u *unit) []string {
	env := map[string]string{"PATH": defaultPath, "LANG": "C.UTF-8", "HOME": "/root", "USER": "root", "LOGNAME": "root", "INVOCATION_ID": "guest-init"}
	for _, kv := range u.environment {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for _, ef := range u.environmentFile {
		vars, err := readEnvFile(ef.path)
		if err != nil {
			continue // optional or missing: start fails below if it was required
		}
		for k, v := range vars {
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// start starts a unit and, for a oneshot, waits until it has run (as systemctl start does).
func (m *manager) start(name string) error {
	s, err := m.load(name)
	if err != nil {
		return err
	}
	s.job.Lock()
	wait, err := m.startJob(s, name)
	s.job.Unlock()
	if wait != nil {
		// A oneshot runs outside the unit's job lock, so that a stop (at shutdown, say)
		// can end it.
		err = wait()
	}
	return err
}

// restart stops a unit and starts it again as one job; with onlyActive (try-restart) a unit
// that is not running is left alone.
func (m *manager) restart(name string, onlyActive bool) error {
	s, err := m.load(name)
	if err != nil {
		return err
	}
	s.job.Lock()
	m.mu.Lock()
	state := s.state
	m.mu.Unlock()
	if onlyActive && state != stateActive && state != stateActivating {
		s.job.Unlock()
		return nil
	}
	m.stopJob(s, name)
	wait, err := m.startJob(s, name)
	s.job.Unlock()
	if wait != nil {
		err = wait()
	}
	return err
}

// startJob starts a unit; its caller holds the unit's job lock. A oneshot is returned as
// wait, to be run once the lock is released.
func (m *manager) startJob(s *service, name string) (wait func() error, err error) {
	m.mu.Lock()
	if m.shutdown {
		m.mu.Unlock()
		return nil, fmt.Errorf("the guest is shutting down")
	}
	u := s.u
	switch s.state {
	case stateActive, stateActivating:
		done := s.done
		m.mu.Unlock()
		if u.typ == "oneshot" && done != nil {
			return func() error { <-done; return nil }, nil
		}
		return nil, nil
	}
	s.state, s.stopping, s.result = stateActivating, false, nil
	s.done = make(chan struct{})
	done := s.done
	if !containsStr(m.order, name) {
		m.order = append(m.order, name)
	}
	m.mu.Unlock()

	if why := u.checkConditions(m.root); why != "" {
		m.log.Printf("Skipping %s: %s", name, why)
		m.setState(s, stateInactive, nil)
		close(done)
		return nil, nil
	}
	for _, ef := range u.environmentFile {
		if _, err := os.Stat(ef.path); err != nil && !ef.optional {
			err = fmt.Errorf("EnvironmentFile=%s: %w", ef.path, err)
			m.setState(s, stateFailed, err)
			close(done)
			return nil, err
		}
	}
	for _, d := range u.runtimeDirs {
		_ = os.MkdirAll(filepath.Join(m.root, "run", d), 0o755)
	}
	for _, d := range u.stateDirs {
		_ = os.MkdirAll(filepath.Join(m.root, "var/lib", d), 0o755)
	}
	if u.typ == "oneshot" {
		return func() error {
			defer close(done)
			return m.runOneshot(s, u)
		}, nil
	}
	go m.supervise(s, done)
	return nil, nil
}

// runOneshot runs ExecStartPre, every ExecStart and ExecStartPost in turn.
func (m *manager) runOneshot(s *service, u *unit) error {
	env := environ(u)
	for _, list := range [][]command{u.execStartPre, u.execStart, u.execStartPost} {
		for _, c := range list {
			if err := m.runCommand(s, u, c, env); errors.Is(err, errStopping) {
				m.setState(s, stateInactive, nil)
				m.log.Printf("Stopped %s", u.name)
				return fmt.Errorf("job for %s canceled: %w", u.name, err)
			} else if err != nil {
				m.setState(s, stateFailed, err)
				m.log.Printf("Failed %s: %v", u.name, err)
				return err
			}
		}
	}
	state := stateInactive
	if u.remainAfterExit {
		state = stateActive
	}
	m.setState(s, state, nil)
	m.log.Printf("Finished %s", u.name)
	return nil
}

// runCommand runs one command to its end.
func (m *manager) runCommand(s *service, u *unit, c command, env []string) error {
	argv := expand(c.argv, envMap(env))
	_, ch, err := m.spawn(s, u.name, argv, env, u.workingDir)
	if errors.Is(err, errStopping) {
		return err
	}
	if err == nil {
		ws := <-ch
		m.mu.Lock()
		s.pid = 0
		m.mu.Unlock()
		if !ws.Exited() || ws.ExitStatus() != 0 {
			err = fmt.Errorf("%s: %s", strings.Join(argv, " "), describe(ws))
		}
	}
	if err != nil && c.ignoreFailed {
		return nil
	}
	return err
}

// supervise runs a long-running service and restarts it as Restart= says, until it is
// stopped or fails for good; done is closed when it returns.
func (m *manager) supervise(s *service, done chan struct{}) {
	defer close(done)
	for {
		u := m.unitOf(s)
		env := environ(u)
		var err error
		for _, c := range u.execStartPre {
			if err = m.runCommand(s, u, c, env); err != nil {
				break
			}
		}
		var ws syscall.WaitStatus
		if err == nil {
			c := u.execStart[len(u.execStart)-1]
			argv := expand(c.argv, envMap(env))
			var pid int
			var ch <-chan syscall.WaitStatus
			pid, ch, err = m.spawn(s, u.name, argv, env, u.workingDir)
			if err == nil {
				m.mu.Lock()
				stopping := s.stopping
				if !stopping {
					s.state = stateActive
				}
				m.mu.Unlock()
				m.log.Printf("Started %s (PID %d)", u.name, pid)
				ws = <-ch
				if !ws.Exited() || ws.ExitStatus() != 0 {
					err = errors.New(describe(ws))
				}
			}
		}
		m.mu.Lock()
		s.pid = 0
		if s.stopping || m.shutdown {
			s.state = stateInactive
			m.mu.Unlock()
			m.log.Printf("Stopped %s", u.name)
			return
		}
		if !restarts(u.restart, err) {
			if err != nil {
				s.state, s.result = stateFailed, err
			} else {
				s.state = stateInactive
			}
			m.mu.Unlock()
			m.log.Printf("%s exited: %v", u.name, err)
			return
		}
		s.state = stateActivating // "activating (auto-restart)"
		m.mu.Unlock()
		m.log.Printf("%s exited (%v); restarting in %s", u.name, err, u.restartDelay)
		deadline := time.Now().Add(u.restartDelay)
		for time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			m.mu.Lock()
			stop := s.stopping || m.shutdown
			m.mu.Unlock()
			if stop {
				m.setState(s, stateInactive, nil)
				return
			}
		}
	}
}

// restarts tells whether Restart= restarts after an exit with err.
func restarts(policy string, err error) bool {
	switch policy {
	case "always":
		return true
	case "on-failure", "on-abnormal", "on-abort", "on-watchdog":
		return err != nil
	case "on-success":
		return err == nil
	}
	return false
}

func describe(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

func (m *manager) setState(s *service, state string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.state, s.result = state, err
}

// stop stops a unit: SIGTERM to its process group, SIGKILL after its stop timeout.
func (m *manager) stop(name string) error {
	m.mu.Lock()
	s, ok := m.services[name]
	m.mu.Unlock()
	if !ok {
		if _, err := loadUnit(m.root, name); err != nil {
			return err
		}
		return nil
	}
	s.job.Lock()
	defer s.job.Unlock()
	m.stopJob(s, name)
	return nil
}

// stopJob stops a unit; its caller holds the unit's job lock. It returns once the unit's
// supervisor has ended: no process of the unit starts after it.
func (m *manager) stopJob(s *service, name string) {
	m.mu.Lock()
	s.stopping = true
	pid, done, typ := s.pid, s.done, ""
	if s.u != nil {
		typ = s.u.typ
	}
	if s.state == stateActive || s.state == stateActivating {
		s.state = stateDeactivating
	}
	timeout := m.stopTimeout
	if s.u != nil && s.u.stopTimeout > 0 && s.u.stopTimeout < timeout {
		timeout = s.u.stopTimeout
	}
	m.mu.Unlock()
	if pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	if done != nil && typ != "oneshot" {
		select {
		case <-done:
		case <-time.After(timeout):
			m.log.Printf("%s did not stop within %s: killing it", name, timeout)
			m.mu.Lock()
			pid = s.pid
			m.mu.Unlock()
			if pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			<-done
		}
	}
	m.setState(s, stateInactive, nil)
}

// status returns a unit's state and whether it is known.
func (m *manager) status(name string) (state string, u *unit, err error) {
	s, err := m.load(name)
	if err != nil {
		return "", nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return s.state, s.u, nil
}

// stopAll stops every started unit in the reverse of their start order, at shutdown.
func (m *manager) stopAll() {
	m.mu.Lock()
	m.shutdown = true
	order := append([]string(nil), m.order...)
	m.mu.Unlock()
	for i := len(order) - 1; i >= 0; i-- {
		if err := m.stop(order[i]); err != nil {
			m.log.Printf("Stopping %s: %v", order[i], err)
		}
	}
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
