//go:build linux

package initd

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The first boot of an Ignition image (Fedora CoreOS, RHCOS, Flatcar): before the real root's
// init starts, Ignition reads the platform's config (on oVirt the config drive's
// openstack/latest/user_data, where the Engine puts the VM's Ignition config) and applies it
// to the root file system: users and groups, then directories, files and links, then systemd
// units (written, masked, enabled through a preset). It runs once: its result file marks the
// disk as provisioned, and every later boot starts from what it wrote.
//
// guest-init plays Ignition's part for the guests whose template is an Ignition image. It
// applies what Cluster API's kubeadm bootstrap provider writes (spec 2.3: passwd.users,
// storage.files with data URLs, systemd.units with contents and drop-ins) and the rest of the
// files stage of specs 2.x and 3.x. What it cannot do here (partitioning disks, making file
// systems, fetching remote resources, merging remote configs, networkd units, a unit that is
// not a service) fails the boot with a message naming the entry, as Ignition's failure stops
// a real boot: nothing is skipped silently.

// IgnitionResultFile is where the result of the first boot's Ignition run is kept (Ignition
// writes /etc/.ignition-result.json too); while it exists Ignition does not run again.
const IgnitionResultFile = "/etc/.ignition-result.json"

// ignitionFailedFile holds the reason of a failed Ignition run, for the host and the tests.
const ignitionFailedFile = "/run/guest-init/ignition-failed"

type ignConfig struct {
	Ignition ignMeta    `json:"ignition"`
	Passwd   ignPasswd  `json:"passwd"`
	Storage  ignStorage `json:"storage"`
	Systemd  ignSystemd `json:"systemd"`
	Networkd struct {
		Units []json.RawMessage `json:"units"`
	} `json:"networkd"`
	KernelArguments json.RawMessage `json:"kernelArguments"`
}

type ignMeta struct {
	Version string `json:"version"`
	Config  struct {
		Append  []json.RawMessage `json:"append"` // 2.x
		Merge   []json.RawMessage `json:"merge"`  // 3.x
		Replace json.RawMessage   `json:"replace"`
	} `json:"config"`
	// Timeouts, security and proxy settings concern fetching remote resources only.
	Timeouts json.RawMessage `json:"timeouts"`
	Security json.RawMessage `json:"security"`
	Proxy    json.RawMessage `json:"proxy"`
}

type ignPasswd struct {
	Users  []ignUser  `json:"users"`
	Groups []ignGroup `json:"groups"`
}

type ignUser struct {
	Name              string          `json:"name"`
	PasswordHash      *string         `json:"passwordHash"`
	SSHAuthorizedKeys []string        `json:"sshAuthorizedKeys"`
	UID               *int            `json:"uid"`
	Gecos             string          `json:"gecos"`
	HomeDir           string          `json:"homeDir"`
	NoCreateHome      bool            `json:"noCreateHome"`
	PrimaryGroup      string          `json:"primaryGroup"`
	Groups            []string        `json:"groups"`
	NoUserGroup       bool            `json:"noUserGroup"`
	NoLogInit         bool            `json:"noLogInit"`
	Shell             string          `json:"shell"`
	System            bool            `json:"system"`
	ShouldExist       *bool           `json:"shouldExist"` // 3.2+
	Create            json.RawMessage `json:"create"`      // 2.x, deprecated
}

type ignGroup struct {
	Name         string  `json:"name"`
	Gid          *int    `json:"gid"`
	PasswordHash *string `json:"passwordHash"`
	System       bool    `json:"system"`
	ShouldExist  *bool   `json:"shouldExist"`
}

type ignStorage struct {
	Disks       []json.RawMessage `json:"disks"`
	Raid        []json.RawMessage `json:"raid"`
	Filesystems []json.RawMessage `json:"filesystems"`
	Luks        []json.RawMessage `json:"luks"`
	Files       []ignFile         `json:"files"`
	Directories []ignDirectory    `json:"directories"`
	Links       []ignLink         `json:"links"`
}

// ignNode is what files, directories and links share.
type ignNode struct {
	// Filesystem is spec 2.x's: "root" is the root file system. Spec 3 has no such key
	// (Ignition 3 warns about it and goes on): the Engine adds it to the /etc/hostname entry
	// it merges into every Ignition config.
	Filesystem string `json:"filesystem"`
	Path       string `json:"path"`
	Overwrite  *bool  `json:"overwrite"`
	User       *ignID `json:"user"`
	Group      *ignID `json:"group"`
}

type ignID struct {
	ID   *int   `json:"id"`
	Name string `json:"name"`
}

type ignFile struct {
	ignNode
	Mode     *int            `json:"mode"`
	Contents *ignResource    `json:"contents"`
	Append   json.RawMessage `json:"append"` // 2.x: a bool; 3.x: resources appended
}

type ignDirectory struct {
	ignNode
	Mode *int `json:"mode"`
}

type ignLink struct {
	ignNode
	Target string `json:"target"`
	Hard   bool   `json:"hard"`
}

type ignResource struct {
	Source       *string         `json:"source"`
	Compression  string          `json:"compression"`
	HTTPHeaders  json.RawMessage `json:"httpHeaders"`
	Verification struct {
		Hash *string `json:"hash"`
	} `json:"verification"`
}

type ignSystemd struct {
	Units []ignUnit `json:"units"`
}

type ignUnit struct {
	Name     string          `json:"name"`
	Enabled  *bool           `json:"enabled"`
	Enable   bool            `json:"enable"` // 2.x, deprecated form of enabled: true
	Mask     bool            `json:"mask"`
	Contents *string         `json:"contents"`
	Dropins  []ignUnitDropin `json:"dropins"`
}

type ignUnitDropin struct {
	Name     string  `json:"name"`
	Contents *string `json:"contents"`
}

// ignitionError is a directive guest-init could not apply: the boot stops on it.
type ignitionError struct{ msg string }

func (e *ignitionError) Error() string { return e.msg }

func ignFail(format string, args ...any) error {
	return &ignitionError{msg: fmt.Sprintf(format, args...)}
}

// parseIgnition reads an Ignition config of spec 2.x or 3.x. A key it does not know fails,
// naming the key: guest-init never skips what a config asks for.
func parseIgnition(data []byte) (*ignConfig, int, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	cfg := &ignConfig{}
	if err := dec.Decode(cfg); err != nil {
		return nil, 0, ignFail("the Ignition config: %v (guest-init applies the files stage of specs 2.x and 3.x)", err)
	}
	major, err := ignMajor(cfg.Ignition.Version)
	if err != nil {
		return nil, 0, err
	}
	return cfg, major, nil
}

func ignMajor(v string) (int, error) {
	if v == "" {
		return 0, ignFail("ignition.version is missing: Ignition refuses a config without one")
	}
	parts := strings.Split(v, ".")
	major, err := strconv.Atoi(parts[0])
	if err != nil || len(parts) < 2 || (major != 2 && major != 3) {
		return 0, ignFail("ignition.version %q: guest-init applies specs 2.x and 3.x", v)
	}
	return major, nil
}

// runIgnition applies the config data to the root file system at root, as Ignition's files
// stage does. Notices (what Ignition itself only warns about) go to l.
func runIgnition(root string, data []byte, l *log.Logger) error {
	return applyIgnition(root, data, l, combinedOutput)
}

// combinedOutput runs a command to its end (outside a guest, where no reaper runs).
func combinedOutput(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

// applyIgnition is runIgnition with the command runner the guest's PID 1 gives it (manager.output).
func applyIgnition(root string, data []byte, l *log.Logger, output func(string, ...string) ([]byte, error)) error {
	cfg, major, err := parseIgnition(data)
	if err != nil {
		return err
	}
	if err := cfg.unsupported(major); err != nil {
		return err
	}
	a := &ignApplier{root: root, major: major, l: l, output: output}
	if err := a.passwd(cfg.Passwd); err != nil {
		return err
	}
	if err := a.storage(cfg.Storage); err != nil {
		return err
	}
	return a.units(cfg.Systemd.Units)
}

// unsupported names the first part of the config guest-init cannot apply here.
func (c *ignConfig) unsupported(major int) error {
	switch {
	case len(c.Ignition.Config.Append) > 0 || len(c.Ignition.Config.Merge) > 0 || len(c.Ignition.Config.Replace) > 0 && string(c.Ignition.Config.Replace) != "null" && string(c.Ignition.Config.Replace) != "{}":
		return ignFail("ignition.config: merging or replacing with a remote config is not supported by the lab's Ignition (the guests reach no config server); put everything into the config itself")
	case len(c.Storage.Disks) > 0:
		return ignFail("storage.disks: partitioning is not supported by the lab's Ignition (a guest's disk is a directory)")
	case len(c.Storage.Raid) > 0:
		return ignFail("storage.raid is not supported by the lab's Ignition")
	case len(c.Storage.Filesystems) > 0:
		return ignFail("storage.filesystems: making or mounting file systems is not supported by the lab's Ignition")
	case len(c.Storage.Luks) > 0:
		return ignFail("storage.luks is not supported by the lab's Ignition")
	case len(c.Networkd.Units) > 0:
		return ignFail("networkd.units: the image has no systemd-networkd")
	case len(c.KernelArguments) > 0 && string(c.KernelArguments) != "null" && string(c.KernelArguments) != "{}":
		return ignFail("kernelArguments: a guest shares the host's kernel; its arguments cannot change")
	}
	return nil
}

type ignApplier struct {
	output func(name string, args ...string) ([]byte, error) // runs a command to its end
	root   string
	major  int
	l      *log.Logger
}

func (a *ignApplier) at(p string) string { return filepath.Join(a.root, p) }

// passwd creates groups, then users (useradd and groupadd on the root, as Ignition runs them),
// and writes each user's authorized keys.
func (a *ignApplier) passwd(p ignPasswd) error {
	for i, g := range p.Groups {
		what := fmt.Sprintf("passwd.groups[%d] (%s)", i, g.Name)
		if g.Name == "" {
			return ignFail("passwd.groups[%d]: name is required", i)
		}
		if g.ShouldExist != nil && !*g.ShouldExist {
			return ignFail("%s: shouldExist: false (deleting groups) is not supported by the lab's Ignition", what)
		}
		if _, ok := lookupID(a.at("/etc/group"), g.Name); ok {
			continue
		}
		args := []string{"--root", a.root}
		if g.Gid != nil {
			args = append(args, "--gid", strconv.Itoa(*g.Gid))
		}
		if g.PasswordHash != nil {
			args = append(args, "--password", *g.PasswordHash)
		}
		if g.System {
			args = append(args, "--system")
		}
		if err := a.run(what, "groupadd", append(args, g.Name)...); err != nil {
			return err
		}
	}
	for i, u := range p.Users {
		if err := a.user(i, u); err != nil {
			return err
		}
	}
	return nil
}

func (a *ignApplier) user(i int, u ignUser) error {
	what := fmt.Sprintf("passwd.users[%d] (%s)", i, u.Name)
	switch {
	case u.Name == "":
		return ignFail("passwd.users[%d]: name is required", i)
	case len(u.Create) > 0 && string(u.Create) != "null":
		return ignFail("%s: create (deprecated in spec 2.x) is not supported by the lab's Ignition; use the user's own fields", what)
	case u.ShouldExist != nil && !*u.ShouldExist:
		return ignFail("%s: shouldExist: false (deleting users) is not supported by the lab's Ignition", what)
	}
	_, exists := lookupID(a.at("/etc/passwd"), u.Name)
	args := []string{"--root", a.root}
	if u.PasswordHash != nil {
		args = append(args, "--password", *u.PasswordHash)
	}
	if u.UID != nil {
		args = append(args, "--uid", strconv.Itoa(*u.UID))
	}
	if u.Gecos != "" {
		args = append(args, "--comment", u.Gecos)
	}
	if u.HomeDir != "" {
		args = append(args, "--home-dir", u.HomeDir)
	}
	if u.PrimaryGroup != "" {
		args = append(args, "--gid", u.PrimaryGroup)
	}
	if len(u.Groups) > 0 {
		args = append(args, "--groups", strings.Join(u.Groups, ","))
	}
	if u.Shell != "" {
		args = append(args, "--shell", u.Shell)
	}
	if exists {
		// Ignition modifies an existing user with usermod (no home or user group then).
		if len(args) > 2 {
			if err := a.run(what, "usermod", append(args, u.Name)...); err != nil {
				return err
			}
		}
	} else {
		if u.NoCreateHome {
			args = append(args, "--no-create-home")
		} else {
			args = append(args, "--create-home")
		}
		if u.NoUserGroup {
			args = append(args, "--no-user-group")
		}
		if u.NoLogInit {
			args = append(args, "--no-log-init")
		}
		if u.System {
			args = append(args, "--system")
		}
		if err := a.run(what, "useradd", append(args, u.Name)...); err != nil {
			return err
		}
	}
	if len(u.SSHAuthorizedKeys) == 0 {
		return nil
	}
	return a.authorizedKeys(what, u.Name, u.SSHAuthorizedKeys)
}

// authorizedKeys writes the keys to ~/.ssh/authorized_keys.d/ignition, where Ignition keeps
// them, and to ~/.ssh/authorized_keys, which sshd reads.
func (a *ignApplier) authorizedKeys(what, user string, keys []string) error {
	home, uid, gid, err := passwdEntry(a.at("/etc/passwd"), user)
	if err != nil {
		return ignFail("%s: %v", what, err)
	}
	data := []byte(strings.Join(keys, "\n") + "\n")
	ssh := a.at(filepath.Join(home, ".ssh"))
	for _, d := range []string{ssh, filepath.Join(ssh, "authorized_keys.d")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return ignFail("%s: %v", what, err)
		}
		if err := os.Lchown(d, uid, gid); err != nil {
			return ignFail("%s: %v", what, err)
		}
	}
	for _, f := range []string{filepath.Join(ssh, "authorized_keys.d", "ignition"), filepath.Join(ssh, "authorized_keys")} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			return ignFail("%s: %v", what, err)
		}
		if err := os.Lchown(f, uid, gid); err != nil {
			return ignFail("%s: %v", what, err)
		}
	}
	return nil
}

func (a *ignApplier) run(what, name string, args ...string) error {
	out, err := a.output(name, args...)
	if err != nil {
		return ignFail("%s: %s: %v: %s", what, name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// storage creates directories, then files, then links, each list in order (Ignition sorts
// them by path depth: a directory entry's parents first).
func (a *ignApplier) storage(s ignStorage) error {
	dirs := append([]ignDirectory(nil), s.Directories...)
	sort.SliceStable(dirs, func(i, j int) bool { return depth(dirs[i].Path) < depth(dirs[j].Path) })
	for i, d := range dirs {
		what := fmt.Sprintf("storage.directories[%d] (%s)", i, d.Path)
		p, err := a.node(what, d.ignNode)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o755)
		if d.Mode != nil {
			mode = os.FileMode(*d.Mode) & os.ModePerm
		}
		if st, err := os.Lstat(p); err == nil && !st.IsDir() {
			if !ptrOr(d.Overwrite, false) {
				return ignFail("%s: a file that is not a directory is in the way and overwrite is false", what)
			}
			if err := os.RemoveAll(p); err != nil {
				return ignFail("%s: %v", what, err)
			}
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return ignFail("%s: %v", what, err)
		}
		if err := os.Chmod(p, mode|setBits(d.Mode)); err != nil {
			return ignFail("%s: %v", what, err)
		}
		if err := a.chown(what, p, d.ignNode); err != nil {
			return err
		}
	}
	for i, f := range s.Files {
		if err := a.file(fmt.Sprintf("storage.files[%d] (%s)", i, f.Path), f); err != nil {
			return err
		}
	}
	for i, k := range s.Links {
		what := fmt.Sprintf("storage.links[%d] (%s)", i, k.Path)
		p, err := a.node(what, k.ignNode)
		if err != nil {
			return err
		}
		if k.Target == "" {
			return ignFail("%s: target is required", what)
		}
		if _, err := os.Lstat(p); err == nil {
			if !ptrOr(k.Overwrite, false) {
				if t, err := os.Readlink(p); err == nil && t == k.Target && !k.Hard {
					continue
				}
				return ignFail("%s: something is at the path and overwrite is false", what)
			}
			if err := os.RemoveAll(p); err != nil {
				return ignFail("%s: %v", what, err)
			}
		}
		if k.Hard {
			err = os.Link(a.at(k.Target), p)
		} else {
			err = os.Symlink(k.Target, p)
		}
		if err != nil {
			return ignFail("%s: %v", what, err)
		}
		if err := a.chown(what, p, k.ignNode); err != nil {
			return err
		}
	}
	return nil
}

// setBits keeps setuid, setgid and sticky bits of an Ignition mode (os.FileMode has its own).
func setBits(mode *int) os.FileMode {
	if mode == nil {
		return 0
	}
	var m os.FileMode
	if *mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if *mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if *mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }

func ptrOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// node checks the path and file system of an entry and creates its parent directories (root's,
// mode 0755, as Ignition does). It returns the path under the root.
func (a *ignApplier) node(what string, n ignNode) (string, error) {
	if n.Path == "" || !filepath.IsAbs(n.Path) {
		return "", ignFail("%s: path must be absolute", what)
	}
	switch {
	case a.major == 2 && n.Filesystem != "root":
		return "", ignFail("%s: filesystem %q: only the root file system (\"root\") exists on the lab's guests", what, n.Filesystem)
	case a.major == 3 && n.Filesystem != "":
		// Ignition 3 decodes configs leniently: an unknown key is a warning.
		a.l.Printf("Ignition: warning at %s: Unused key filesystem", what)
	}
	p := a.at(filepath.Clean(n.Path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", ignFail("%s: creating its directory: %v", what, err)
	}
	return p, nil
}

func (a *ignApplier) file(what string, f ignFile) error {
	p, err := a.node(what, f.ignNode)
	if err != nil {
		return err
	}
	var contents []byte
	if f.Contents != nil {
		if contents, err = a.fetch(what+" contents", *f.Contents); err != nil {
			return err
		}
	}
	appendV2 := false
	var appends [][]byte
	if len(f.Append) > 0 && string(f.Append) != "null" {
		if a.major == 2 {
			if err := json.Unmarshal(f.Append, &appendV2); err != nil {
				return ignFail("%s: append: spec 2.x takes true or false: %v", what, err)
			}
		} else {
			var rs []ignResource
			if err := json.Unmarshal(f.Append, &rs); err != nil {
				return ignFail("%s: append: spec 3.x takes a list of resources: %v", what, err)
			}
			for i, r := range rs {
				b, err := a.fetch(fmt.Sprintf("%s append[%d]", what, i), r)
				if err != nil {
					return err
				}
				appends = append(appends, b)
			}
		}
	}
	// Files are overwritten by default in spec 2.x; spec 3.x keeps an existing file unless
	// overwrite is set, and fails when it would have to replace it.
	overwrite := ptrOr(f.Overwrite, a.major == 2)
	st, statErr := os.Lstat(p)
	exists := statErr == nil
	if exists && st.IsDir() {
		return ignFail("%s: a directory is in the way", what)
	}
	mode := os.FileMode(0o644)
	if f.Mode != nil {
		mode = os.FileMode(*f.Mode) & os.ModePerm
	} else if exists && a.major == 3 && !overwrite {
		mode = st.Mode() & os.ModePerm
	}
	flags := os.O_WRONLY | os.O_CREATE
	switch {
	case appendV2:
		flags |= os.O_APPEND
	case exists && a.major == 3 && !overwrite:
		if f.Contents != nil && f.Contents.Source != nil {
			return ignFail("%s: the file exists and overwrite is false (spec 3.x); set overwrite: true to replace it", what)
		}
		flags |= os.O_APPEND // contents left as they are; appends go to the end
	default:
		flags |= os.O_TRUNC
		if exists && st.Mode()&os.ModeSymlink != 0 {
			if err := os.Remove(p); err != nil {
				return ignFail("%s: %v", what, err)
			}
		}
	}
	fh, err := os.OpenFile(p, flags, mode)
	if err != nil {
		return ignFail("%s: %v", what, err)
	}
	for _, b := range append([][]byte{contents}, appends...) {
		if _, err := fh.Write(b); err != nil {
			fh.Close()
			return ignFail("%s: %v", what, err)
		}
	}
	if err := fh.Close(); err != nil {
		return ignFail("%s: %v", what, err)
	}
	if err := os.Chmod(p, mode|setBits(f.Mode)); err != nil {
		return ignFail("%s: %v", what, err)
	}
	return a.chown(what, p, f.ignNode)
}

// fetch returns the bytes of a resource: data URLs only (RFC 2397), gunzipped when compressed,
// checked against its verification hash.
func (a *ignApplier) fetch(what string, r ignResource) ([]byte, error) {
	if len(r.HTTPHeaders) > 0 && string(r.HTTPHeaders) != "null" && string(r.HTTPHeaders) != "[]" {
		return nil, ignFail("%s: httpHeaders: the lab's Ignition fetches no remote resources", what)
	}
	var b []byte
	if r.Source != nil && *r.Source != "" {
		u, err := url.Parse(*r.Source)
		if err != nil {
			return nil, ignFail("%s: source: %v", what, err)
		}
		if u.Scheme != "data" {
			return nil, ignFail("%s: source %s://...: the lab's Ignition fetches no remote resources (the guests reach no server but the lab's); inline the contents as a data URL", what, u.Scheme)
		}
		if b, err = decodeDataURL(*r.Source); err != nil {
			return nil, ignFail("%s: %v", what, err)
		}
	}
	switch r.Compression {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, ignFail("%s: gzip: %v", what, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			return nil, ignFail("%s: gzip: %v", what, err)
		}
	default:
		return nil, ignFail("%s: compression %q: Ignition knows gzip only", what, r.Compression)
	}
	if r.Verification.Hash != nil && *r.Verification.Hash != "" {
		if err := verifyHash(b, *r.Verification.Hash); err != nil {
			return nil, ignFail("%s: %v", what, err)
		}
	}
	return b, nil
}

// decodeDataURL decodes "data:[<media type>][;base64],<data>".
func decodeDataURL(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return nil, errors.New("not a data URL")
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, errors.New("a data URL without a comma")
	}
	if strings.HasSuffix(meta, ";base64") {
		unescaped, err := url.PathUnescape(data)
		if err != nil {
			return nil, fmt.Errorf("data URL: %w", err)
		}
		b, err := base64.StdEncoding.DecodeString(unescaped)
		if err != nil {
			return nil, fmt.Errorf("data URL: base64: %w", err)
		}
		return b, nil
	}
	b, err := url.PathUnescape(data)
	if err != nil {
		return nil, fmt.Errorf("data URL: %w", err)
	}
	return []byte(b), nil
}

// verifyHash checks "sha512-<hex>" (and spec 3's "sha256-<hex>").
func verifyHash(b []byte, spec string) error {
	algo, want, ok := strings.Cut(spec, "-")
	if !ok {
		return fmt.Errorf("verification.hash %q: want <function>-<hex digest>", spec)
	}
	var h hash.Hash
	switch algo {
	case "sha512":
		h = sha512.New()
	case "sha256":
		h = sha256.New()
	default:
		return fmt.Errorf("verification.hash: function %q is not supported (sha512, sha256)", algo)
	}
	h.Write(b)
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(want) {
		return fmt.Errorf("verification.hash: the contents' %s is %s, the config wants %s", algo, got, want)
	}
	return nil
}

// chown sets the owner an entry names (by id or by name in the root's passwd and group).
func (a *ignApplier) chown(what, p string, n ignNode) error {
	uid, gid := 0, 0
	if n.User != nil {
		id, err := a.resolve(n.User, "/etc/passwd")
		if err != nil {
			return ignFail("%s: user: %v", what, err)
		}
		uid = id
	}
	if n.Group != nil {
		id, err := a.resolve(n.Group, "/etc/group")
		if err != nil {
			return ignFail("%s: group: %v", what, err)
		}
		gid = id
	}
	if err := os.Lchown(p, uid, gid); err != nil {
		return ignFail("%s: %v", what, err)
	}
	return nil
}

func (a *ignApplier) resolve(id *ignID, db string) (int, error) {
	if id.ID != nil {
		return *id.ID, nil
	}
	if id.Name == "" {
		return 0, nil
	}
	n, ok := lookupID(a.at(db), id.Name)
	if !ok {
		return 0, fmt.Errorf("%q is not in the guest's %s", id.Name, db)
	}
	return n, nil
}

// lookupID finds name's numeric id (the third field) in a passwd or group file.
func lookupID(path, name string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 3 && f[0] == name {
			n, err := strconv.Atoi(f[2])
			return n, err == nil
		}
	}
	return 0, false
}

// passwdEntry returns a user's home directory, uid and gid.
func passwdEntry(path, name string) (string, int, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 7 && f[0] == name {
			uid, err1 := strconv.Atoi(f[2])
			gid, err2 := strconv.Atoi(f[3])
			if err := errors.Join(err1, err2); err != nil {
				return "", 0, 0, fmt.Errorf("user %s in %s: %w", name, path, err)
			}
			return f[5], uid, gid, nil
		}
	}
	return "", 0, 0, fmt.Errorf("user %s is not in %s", name, path)
}

// units writes, masks and enables systemd units. Enabling goes through a preset file, as
// Ignition does, and is applied at once (the first boot's systemctl preset).
func (a *ignApplier) units(units []ignUnit) error {
	var preset []string
	for i, u := range units {
		what := fmt.Sprintf("systemd.units[%d] (%s)", i, u.Name)
		if u.Name == "" || strings.Contains(u.Name, "/") {
			return ignFail("systemd.units[%d]: a unit name is required", i)
		}
		dir := a.at("/etc/systemd/system")
		p := filepath.Join(dir, u.Name)
		if u.Contents != nil {
			if err := writeFile(p, *u.Contents, 0o644); err != nil {
				return ignFail("%s: %v", what, err)
			}
		}
		for j, d := range u.Dropins {
			if d.Name == "" || strings.Contains(d.Name, "/") {
				return ignFail("%s: dropins[%d]: a drop-in name is required", what, j)
			}
			contents := ""
			if d.Contents != nil {
				contents = *d.Contents
			}
			if err := writeFile(filepath.Join(dir, u.Name+".d", d.Name), contents, 0o644); err != nil {
				return ignFail("%s: dropins[%d]: %v", what, j, err)
			}
		}
		if u.Mask {
			_ = os.Remove(p)
			if err := os.Symlink(os.DevNull, p); err != nil {
				return ignFail("%s: masking: %v", what, err)
			}
		}
		enabled := u.Enable || ptrOr(u.Enabled, false)
		if u.Enabled == nil && !u.Enable {
			continue
		}
		if !strings.HasSuffix(u.Name, ".service") {
			return ignFail("%s: enabling a unit that is not a service: guest-init starts .service units only", what)
		}
		if enabled {
			preset = append(preset, "enable "+u.Name)
		} else {
			preset = append(preset, "disable "+u.Name)
		}
		if err := a.setEnabled(u.Name, enabled); err != nil {
			return ignFail("%s: %v", what, err)
		}
	}
	if len(preset) == 0 {
		return nil
	}
	return writeFile(a.at("/etc/systemd/system-preset/20-ignition.preset"), strings.Join(preset, "\n")+"\n", 0o644)
}

// setEnabled links a unit into (or out of) the targets of its [Install] WantedBy=.
func (a *ignApplier) setEnabled(name string, on bool) error {
	u, err := loadUnit(a.root, name)
	if err != nil {
		return err
	}
	if on && len(u.wantedBy) == 0 {
		return fmt.Errorf("unit %s has no [Install] WantedBy=: nothing to enable", name)
	}
	for _, t := range u.wantedBy {
		l := a.at(filepath.Join("/etc/systemd/system", t+".wants", name))
		if !on {
			if err := os.Remove(l); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			return err
		}
		target, err := filepath.Rel(a.root, u.path)
		if err != nil {
			return err
		}
		_ = os.Remove(l)
		if err := os.Symlink("/"+target, l); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(p, data string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(data), mode)
}
