//go:build linux

package initd

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// unitDirs are where systemd looks for units, highest precedence first (systemd.unit(5)):
// the administrator's, the runtime's, then the packages'.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

// command is one Exec*= line: the argv and whether a failure is ignored ("-" prefix).
type command struct {
	argv         []string
	ignoreFailed bool
	line         string
}

// unit is what guest-init takes of a .service unit and its drop-ins.
type unit struct {
	name string
	path string // the unit file read
	// Service.
	typ             string // simple, exec, notify, oneshot, forking, idle
	remainAfterExit bool
	execStartPre    []command
	execStart       []command
	execStartPost   []command
	environment     []string // KEY=VALUE, in order
	environmentFile []envFile
	restart         string // no, always, on-failure, on-abnormal, on-success, on-abort, on-watchdog
	restartDelay    time.Duration
	stopTimeout     time.Duration
	runtimeDirs     []string
	stateDirs       []string
	workingDir      string
	// Unit.
	after, before, wants, requires []string
	conditions                     []condition
	// Install.
	wantedBy []string
}

// envFile is an EnvironmentFile= entry; optional with the "-" prefix.
type envFile struct {
	path     string
	optional bool
}

// condition is a Condition*= or Assert*= entry guest-init evaluates.
type condition struct {
	key, value string
}

// unsupported directives fail the unit's start with a message naming them: guest-init never
// silently runs a unit differently from systemd. Directives that only tune what systemd does
// around the process (sandboxing, limits, logging, descriptions, ordering guest-init does not
// need) are accepted and ignored; they are listed in ignoredDirectives.
var ignoredDirectives = map[string]bool{
	"Description": true, "Documentation": true, "DefaultDependencies": true, "Conflicts": true,
	"StartLimitInterval": true, "StartLimitIntervalSec": true, "StartLimitBurst": true,
	"ConditionKernelCommandLine": true, "ConditionVirtualization": true, "ConditionSecurity": true,
	"ConditionPathIsReadWrite": true, "RequiresMountsFor": true, "OnFailure": true, "PartOf": true,
	"BindsTo": true, "Alias": true, "Also": true, "RequiredBy": true, "Delegate": true, "KillMode": true,
	"LimitNPROC": true, "LimitCORE": true, "LimitNOFILE": true, "LimitMEMLOCK": true, "TasksMax": true,
	"OOMScoreAdjust": true, "StandardOutput": true, "StandardError": true, "SyslogIdentifier": true,
	"TimeoutSec": true, "TimeoutStartSec": true, "KillSignal": true, "SendSIGKILL": true,
	"ExecReload": true, "ExecStop": true, "ExecStopPost": true, "NotifyAccess": true, "PIDFile": true,
	"IgnoreSIGPIPE": true, "Nice": true, "IOSchedulingClass": true, "CPUAccounting": true,
	"MemoryAccounting": true, "SuccessExitStatus": true, "UMask": true, "ProtectSystem": true,
	"ProtectHome": true, "PrivateTmp": true, "NoNewPrivileges": true, "ReadWritePaths": true,
	"ConditionPathIsMountPoint": true, "ConditionFirstBoot": true, "ConditionNeedsUpdate": true,
	"ConditionEnvironment": true, "Slice": true, "RestartPreventExitStatus": true, "TimeoutStopFailureMode": true,
	"StandardInput": true, "TTYPath": true, "TTYReset": true, "TTYVHangup": true,
}

// loadUnit reads name (e.g. "kubelet.service") from the unit directories, then its drop-ins
// (<name>.d/*.conf of every directory, in file-name order; a later file wins, and an empty
// assignment resets a list, as systemd.unit(5) says).
func loadUnit(root, name string) (*unit, error) {
	u := &unit{name: name, typ: "simple", restart: "no", restartDelay: 100 * time.Millisecond, stopTimeout: 90 * time.Second}
	found := ""
	for _, d := range unitDirs {
		p := filepath.Join(root, d, name)
		if masked(p) {
			return nil, fmt.Errorf("Unit %s is masked.", name) //nolint:staticcheck,revive // systemctl's own wording
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			found = p
			break
		}
	}
	if found == "" {
		return nil, fmt.Errorf("Unit %s not found.", name) //nolint:staticcheck,revive // systemctl's own wording
	}
	u.path = found
	files := []string{found}
	dropins := map[string]string{}
	for i := len(unitDirs) - 1; i >= 0; i-- {
		matches, _ := filepath.Glob(filepath.Join(root, unitDirs[i], name+".d", "*.conf"))
		for _, m := range matches {
			dropins[filepath.Base(m)] = m
		}
	}
	names := make([]string, 0, len(dropins))
	for n := range dropins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, dropins[n])
	}
	for _, f := range files {
		if err := u.parse(f); err != nil {
			return nil, err
		}
	}
	if len(u.execStart) == 0 {
		return nil, fmt.Errorf("unit %s (%s) has no ExecStart", name, found)
	}
	return u, nil
}

// parse reads one unit file or drop-in into u.
func (u *unit) parse(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading unit %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	section := ""
	var cont strings.Builder
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if strings.HasSuffix(line, "\\") {
			cont.WriteString(strings.TrimSuffix(line, "\\"))
			cont.WriteString(" ")
			continue
		}
		cont.WriteString(line)
		line = strings.TrimSpace(cont.String())
		cont.Reset()
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("%s:%d: %q is no key=value line", path, lineNo, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if err := u.set(section, key, value); err != nil {
			return fmt.Errorf("%s:%d: %w", path, lineNo, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading unit %s: %w", path, err)
	}
	return nil
}

// set applies one directive.
func (u *unit) set(section, key, value string) error {
	switch section + "." + key {
	case "Service.Type":
		switch value {
		case "simple", "exec", "notify", "oneshot", "idle":
			u.typ = value
		default:
			return fmt.Errorf("service type %q (Type=) is not supported by guest-init (simple, exec, notify, oneshot, idle)", value)
		}
	case "Service.RemainAfterExit":
		u.remainAfterExit = parseBool(value)
	case "Service.ExecStartPre":
		return appendCommand(&u.execStartPre, value)
	case "Service.ExecStart":
		return appendCommand(&u.execStart, value)
	case "Service.ExecStartPost":
		return appendCommand(&u.execStartPost, value)
	case "Service.Environment":
		if value == "" {
			u.environment = nil
			return nil
		}
		words, err := splitQuoted(value)
		if err != nil {
			return fmt.Errorf("environment %q (Environment=): %w", value, err)
		}
		u.environment = append(u.environment, words...)
	case "Service.EnvironmentFile":
		if value == "" {
			u.environmentFile = nil
			return nil
		}
		ef := envFile{path: value}
		if strings.HasPrefix(value, "-") {
			ef = envFile{path: value[1:], optional: true}
		}
		u.environmentFile = append(u.environmentFile, ef)
	case "Service.Restart":
		u.restart = value
	case "Service.RestartSec":
		d, err := parseSec(value)
		if err != nil {
			return fmt.Errorf("RestartSec=%s: %w", value, err)
		}
		u.restartDelay = d
	case "Service.TimeoutStopSec":
		d, err := parseSec(value)
		if err != nil {
			return fmt.Errorf("TimeoutStopSec=%s: %w", value, err)
		}
		u.stopTimeout = d
	case "Service.RuntimeDirectory":
		u.runtimeDirs = append(u.runtimeDirs, strings.Fields(value)...)
	case "Service.StateDirectory":
		u.stateDirs = append(u.stateDirs, strings.Fields(value)...)
	case "Service.WorkingDirectory":
		u.workingDir = strings.TrimPrefix(value, "-")
	case "Unit.After":
		u.after = append(u.after, strings.Fields(value)...)
	case "Unit.Before":
		u.before = append(u.before, strings.Fields(value)...)
	case "Unit.Wants":
		u.wants = append(u.wants, strings.Fields(value)...)
	case "Unit.Requires":
		u.requires = append(u.requires, strings.Fields(value)...)
	case "Unit.ConditionPathExists", "Unit.ConditionFileNotEmpty", "Unit.ConditionDirectoryNotEmpty",
		"Unit.ConditionFileIsExecutable", "Unit.AssertPathExists":
		u.conditions = append(u.conditions, condition{key: key, value: value})
	case "Install.WantedBy":
		u.wantedBy = append(u.wantedBy, strings.Fields(value)...)
	default:
		if ignoredDirectives[key] {
			return nil
		}
		return fmt.Errorf("[%s] %s= is not supported by guest-init; the unit would not run as systemd runs it", section, key)
	}
	return nil
}

// appendCommand parses an Exec*= value; an empty value resets the list.
func appendCommand(list *[]command, value string) error {
	if value == "" {
		*list = nil
		return nil
	}
	c := command{line: value}
	for len(value) > 0 && strings.ContainsAny(value[:1], "-@+!:") {
		switch value[0] {
		case '-':
			c.ignoreFailed = true
		case '@', '!', ':':
			return fmt.Errorf("the %q prefix of %q is not supported by guest-init", value[:1], c.line)
		}
		value = value[1:]
	}
	argv, err := splitQuoted(value)
	if err != nil {
		return fmt.Errorf("%q: %w", c.line, err)
	}
	if len(argv) == 0 {
		return fmt.Errorf("%q has no command", c.line)
	}
	c.argv = argv
	*list = append(*list, c)
	return nil
}

// splitQuoted splits a systemd value into words: double or single quotes group, a backslash
// escapes the next character.
func splitQuoted(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
		quote  rune
		escape bool
	)
	for _, r := range s {
		switch {
		case escape:
			cur.WriteRune(r)
			escape, inWord = false, true
		case r == '\\':
			escape = true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// parseSec reads a systemd time span: a bare number of seconds, or numbers with units.
func parseSec(v string) (time.Duration, error) {
	if v == "infinity" {
		return 0, nil
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(n * float64(time.Second)), nil
	}
	return time.ParseDuration(strings.ReplaceAll(strings.ReplaceAll(v, "min", "m"), " ", ""))
}

func parseBool(v string) bool {
	switch strings.ToLower(v) {
	case "1", "yes", "true", "on":
		return true
	}
	return false
}

// expand replaces $VAR (split into words) and ${VAR} (one word) in argv as systemd does for
// ExecStart= lines.
func expand(argv []string, env map[string]string) []string {
	out := make([]string, 0, len(argv))
	for i, a := range argv {
		if i > 0 && strings.HasPrefix(a, "$") && !strings.HasPrefix(a, "${") && isName(a[1:]) {
			out = append(out, strings.Fields(env[a[1:]])...)
			continue
		}
		out = append(out, os.Expand(a, func(k string) string {
			if k == "$" {
				return "$" // systemd's escape: "$$" is a literal "$"
			}
			return env[k]
		}))
	}
	return out
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r != '_' && (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// readEnvFile parses an EnvironmentFile: KEY=VALUE lines, # comments, optional quotes.
func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// checkConditions reports why a unit is skipped ("" when it runs).
func (u *unit) checkConditions(root string) string {
	for _, c := range u.conditions {
		neg := strings.HasPrefix(c.value, "!")
		p := filepath.Join(root, strings.TrimPrefix(c.value, "!"))
		var ok bool
		switch c.key {
		case "ConditionPathExists", "AssertPathExists":
			_, err := os.Stat(p)
			ok = err == nil
		case "ConditionFileNotEmpty":
			st, err := os.Stat(p)
			ok = err == nil && !st.IsDir() && st.Size() > 0
		case "ConditionDirectoryNotEmpty":
			entries, err := os.ReadDir(p)
			ok = err == nil && len(entries) > 0
		case "ConditionFileIsExecutable":
			st, err := os.Stat(p)
			ok = err == nil && !st.IsDir() && st.Mode()&0o111 != 0
		}
		if ok == neg {
			return fmt.Sprintf("%s=%s is not met", c.key, c.value)
		}
	}
	return ""
}

// masked reports whether a unit file is a link to /dev/null (systemctl mask).
func masked(p string) bool {
	t, err := os.Readlink(p)
	return err == nil && t == os.DevNull
}
