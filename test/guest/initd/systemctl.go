//go:build linux

package initd

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// controlSocket is where guest-init answers the guest's systemctl.
const controlSocket = "/run/guest-init/control.sock"

// request and reply are systemctl's exchange with guest-init: one JSON line each way.
type request struct {
	Args []string `json:"args"`
}

type reply struct {
	Code   int    `json:"code"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// Systemctl is the guest's systemctl: it sends its arguments to guest-init and prints what
// guest-init answers, exiting with its code (systemctl's own codes: 0 ok, 1 error, 3 not
// active, 4 or 5 no such unit).
func Systemctl(args []string) int {
	conn, err := net.Dial("unix", controlSocket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "System has not been booted with guest-init as init system (PID 1). Can't operate.\nFailed to connect to bus: %v\n", err)
		return 1
	}
	defer conn.Close()
	if err := json.NewEncoder(conn).Encode(request{Args: args}); err != nil {
		fmt.Fprintln(os.Stderr, "systemctl:", err)
		return 1
	}
	var r reply
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&r); err != nil {
		fmt.Fprintln(os.Stderr, "systemctl:", err)
		return 1
	}
	fmt.Fprint(os.Stdout, r.Stdout)
	fmt.Fprint(os.Stderr, r.Stderr)
	return r.Code
}

// serveControl answers systemctl requests until the listener closes.
func (m *manager) serveControl(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			var req request
			if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
				return
			}
			r := m.systemctl(req.Args)
			m.log.Printf("systemctl %s: exit %d", strings.Join(req.Args, " "), r.Code)
			_ = json.NewEncoder(conn).Encode(r)
		}()
	}
}

// unitName adds ".service" to a name without a unit type.
func unitName(n string) string {
	if strings.Contains(n, ".") {
		return n
	}
	return n + ".service"
}

// systemctl carries out one systemctl command line. What kubeadm, cloud-init and CABPK's
// Ignition units ask is supported; anything else fails naming what it cannot do.
func (m *manager) systemctl(args []string) reply {
	var verb string
	var units []string
	now, quiet := false, false
	for _, a := range args {
		switch {
		case a == "--now":
			now = true
		case a == "-q" || a == "--quiet":
			quiet = true
		case a == "--no-pager" || a == "--system" || a == "--no-block" || a == "--no-ask-password" || a == "-l" || a == "--full":
		case strings.HasPrefix(a, "-"):
			return reply{Code: 1, Stderr: fmt.Sprintf("systemctl: option %s is not supported by guest-init\n", a)}
		case verb == "":
			verb = a
		default:
			units = append(units, unitName(a))
		}
	}
	fail := func(code int, format string, a ...any) reply {
		return reply{Code: code, Stderr: fmt.Sprintf(format, a...)}
	}
	switch verb {
	case "daemon-reload":
		m.reload()
		return reply{}
	case "start", "restart", "try-restart", "reload-or-restart", "stop":
		if len(units) == 0 {
			return fail(1, "Too few arguments.\n")
		}
		for _, u := range units {
			var err error
			switch verb {
			case "start":
				err = m.start(u)
			case "stop":
				err = m.stop(u)
			default:
				err = m.restart(u, verb == "try-restart")
			}
			if err != nil {
				if strings.Contains(err.Error(), "not found") {
					return fail(5, "Failed to %s %s: Unit %s not found.\n", verb, u, u)
				}
				return fail(1, "Job for %s failed: %v\n", u, err)
			}
		}
		return reply{}
	case "enable", "disable":
		for _, u := range units {
			if err := m.setEnabled(u, verb == "enable"); err != nil {
				return fail(1, "Failed to %s unit: %v\n", verb, err)
			}
			if now {
				var err error
				if verb == "enable" {
					err = m.start(u)
				} else {
					err = m.stop(u)
				}
				if err != nil {
					return fail(1, "Job for %s failed: %v\n", u, err)
				}
			}
		}
		return reply{}
	case "is-active", "is-failed":
		code, out := 3, ""
		if verb == "is-failed" {
			code = 1
		}
		for _, u := range units {
			state, _, err := m.status(u)
			if err != nil {
				state = stateInactive
			}
			out += state + "\n"
			if (verb == "is-active" && state == stateActive) || (verb == "is-failed" && state == stateFailed) {
				code = 0
			}
		}
		if quiet {
			out = ""
		}
		return reply{Code: code, Stdout: out}
	case "is-enabled":
		code, out := 1, ""
		for _, u := range units {
			if _, err := loadUnit(m.root, u); err != nil {
				return fail(1, "Failed to get unit file state for %s: No such file or directory\n", u)
			}
			if m.enabled(u) {
				out += "enabled\n"
				code = 0
			} else {
				out += "disabled\n"
			}
		}
		if quiet {
			out = ""
		}
		return reply{Code: code, Stdout: out}
	case "status":
		var b strings.Builder
		code := 0
		for _, u := range units {
			state, un, err := m.status(u)
			if err != nil {
				return fail(4, "Unit %s could not be found.\n", u)
			}
			en := "disabled"
			if m.enabled(u) {
				en = "enabled"
			}
			fmt.Fprintf(&b, "* %s\n     Loaded: loaded (%s; %s)\n     Active: %s\n", u, un.path, en, state)
			if state != stateActive {
				code = 3
			}
		}
		return reply{Code: code, Stdout: b.String()}
	case "":
		return fail(1, "systemctl without a command is not supported by guest-init\n")
	}
	return fail(1, "systemctl %s is not supported by guest-init (daemon-reload, start, stop, restart, try-restart, reload-or-restart, enable, disable, is-active, is-failed, is-enabled, status)\n", verb)
}

// wantsLinks are the symlinks that enable a unit: one per WantedBy= target.
func wantsLinks(u *unit) []string {
	out := make([]string, 0, len(u.wantedBy))
	for _, t := range u.wantedBy {
		out = append(out, filepath.Join("/etc/systemd/system", t+".wants", u.name))
	}
	return out
}

// enabled reports whether a unit is enabled (linked into a target's wants).
func (m *manager) enabled(name string) bool {
	u, err := loadUnit(m.root, name)
	if err != nil {
		return false
	}
	for _, l := range wantsLinks(u) {
		if _, err := os.Lstat(l); err == nil {
			return true
		}
	}
	return false
}

// setEnabled links or unlinks a unit into the targets of its WantedBy=.
func (m *manager) setEnabled(name string, on bool) error {
	u, err := loadUnit(m.root, name)
	if err != nil {
		return err
	}
	if len(u.wantedBy) == 0 && on {
		return fmt.Errorf("unit %s has no [Install] WantedBy=: nothing to enable", name)
	}
	for _, l := range wantsLinks(u) {
		if on {
			if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(u.path, l); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
		} else if err := os.Remove(l); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
