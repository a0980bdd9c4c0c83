//go:build linux

package initd

import (
	"context"
	"errors"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newTestManager is a manager whose units live under a temporary root, with its reaper
// running (the test process stands in for PID 1: its children are the units' processes).
func newTestManager(t *testing.T, units map[string]string) (*manager, string) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "etc/systemd/system")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range units {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(text, "@ROOT@", root)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := newManager(log.New(os.Stderr, "guest-init: ", log.Lmicroseconds), 5*time.Second)
	m.root = root
	// One reaper at a time: another test's would take this one's children.
	quit := make(chan struct{})
	go m.reap(quit)
	t.Cleanup(func() { close(quit) })
	return m, root
}

// pidsOf reads the PIDs a unit's runs appended to a file.
func pidsOf(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, p)
	}
	return out
}

// alive tells whether a process exists (the reaper collects exited ones).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s", what, d)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A stop asked while a restart of the same unit is under way (kubeadm restarting the kubelet
// while an operator, or a test, stops it) ends with the unit stopped, as systemd's job queue
// has it: the stop runs after the restart, never beside it. Beside it, the stop returned
// while the restart went on to start a kubelet nobody stopped (the mhc_remediations flake:
// "systemctl stop kubelet: exit 0", then "Started kubelet.service" 126 ms later).
func TestAStopDuringARestartLeavesTheUnitStopped(t *testing.T) {
	m, root := newTestManager(t, map[string]string{
		// Slow to stop on SIGTERM, like a kubelet: the restart's stop takes a while.
		"slow.service": `[Service]
ExecStart=/bin/sh -c 'echo $$$$ >> @ROOT@/pids; trap "sleep 0.5; exit 0" TERM; while :; do sleep 0.05; done'
Restart=always
RestartSec=0.1
`,
	})
	pids := filepath.Join(root, "pids")
	if r := m.systemctl([]string{"start", "slow"}); r.Code != 0 {
		t.Fatalf("start: %+v", r)
	}
	waitFor(t, "the first run", 5*time.Second, func() bool { return len(pidsOf(t, pids)) == 1 })

	var wg sync.WaitGroup
	wg.Go(func() {
		if r := m.systemctl([]string{"restart", "slow"}); r.Code != 0 {
			t.Errorf("restart: %+v", r)
		}
	})
	waitFor(t, "the restart stopping the first run", 5*time.Second, func() bool {
		st, _, _ := m.status("slow.service")
		return st == stateDeactivating
	})
	if r := m.systemctl([]string{"stop", "slow"}); r.Code != 0 {
		t.Fatalf("stop: %+v", r)
	}
	// What a caller of systemctl stop relies on, the moment it returns: nothing of the unit
	// runs, and nothing of it starts afterwards.
	stoppedAt := len(pidsOf(t, pids))
	for _, p := range pidsOf(t, pids) {
		if alive(p) {
			t.Errorf("process %d of the unit still runs after systemctl stop returned", p)
		}
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // past a restart delay: an auto-restart would have run
	if got := pidsOf(t, pids); len(got) != stoppedAt {
		t.Errorf("the unit started again after systemctl stop returned: runs %v, %d before the stop returned", got, stoppedAt)
	}
	for _, p := range pidsOf(t, pids) {
		if alive(p) {
			t.Errorf("process %d of the unit runs after systemctl stop", p)
			_ = syscall.Kill(-p, syscall.SIGKILL)
		}
	}
	if st, _, _ := m.status("slow.service"); st != stateInactive {
		t.Errorf("state after stop: %s, want %s", st, stateInactive)
	}
}

// A stop while a unit waits to restart, or while its ExecStartPre runs, cancels the restart:
// the unit's main process does not start after the stop returned.
func TestAStopInTheRestartWindowCancelsTheRestart(t *testing.T) {
	m, root := newTestManager(t, map[string]string{
		// The first run fails at once; the next would run until stopped.
		"flappy.service": `[Service]
ExecStartPre=/bin/sleep 0.02
ExecStart=/bin/sh -c 'echo $$$$ >> @ROOT@/pids; if [ -e @ROOT@/ran ]; then exec sleep 600; fi; touch @ROOT@/ran; exit 1'
Restart=always
RestartSec=0.05
`,
	})
	pids := filepath.Join(root, "pids")
	for i := range 20 {
		_ = os.Remove(filepath.Join(root, "ran"))
		if r := m.systemctl([]string{"start", "flappy"}); r.Code != 0 {
			t.Fatalf("start: %+v", r)
		}
		// Somewhere in the failed run, the restart delay or the next ExecStartPre.
		time.Sleep(time.Duration(i*4) * time.Millisecond)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if r := m.systemctl([]string{"stop", "flappy"}); r.Code != 0 {
				t.Errorf("stop: %+v", r)
			}
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: systemctl stop did not return within 10s", i)
		}
		n := len(pidsOf(t, pids))
		time.Sleep(150 * time.Millisecond)
		for _, p := range pidsOf(t, pids) {
			if alive(p) {
				t.Errorf("round %d: process %d runs after systemctl stop returned", i, p)
				_ = syscall.Kill(-p, syscall.SIGKILL)
			}
		}
		if got := len(pidsOf(t, pids)); got != n {
			t.Errorf("round %d: %d runs started after systemctl stop returned", i, got-n)
		}
	}
}

// A command PID 1 runs to its end (Ignition's useradd, `ip link set lo up`) ends with its own
// exit status while the reaper runs beside it: the reaper, woken by the command's SIGCHLD,
// must not collect it first (the real-guest flake: "useradd: waitid: no child processes",
// and Ignition, then the boot, failed).
func TestACommandPID1WaitsForIsNotTakenByTheReaper(t *testing.T) {
	m, _ := newTestManager(t, nil)
	for i := range 300 {
		out, err := m.output("/bin/sh", "-c", "echo ran")
		if err != nil {
			t.Fatalf("command %d: %v (output %q)", i, err, out)
		}
		if string(out) != "ran\n" {
			t.Fatalf("command %d: output %q, want %q", i, out, "ran\n")
		}
	}
}
