//go:build linux

package initd

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/ignition"
)

// ignRoot is a root file system for Ignition to write: the host's account databases copied
// (useradd works on them through --root), nothing else.
func ignRoot(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Ignition's files stage creates users and sets owners: needs root (make test runs as root in CI)")
	}
	root := t.TempDir()
	for _, f := range []string{"passwd", "group", "shadow", "gshadow", "login.defs"} {
		b, err := os.ReadFile(filepath.Join("/etc", f))
		if err != nil {
			continue
		}
		if err := writeFile(filepath.Join(root, "etc", f), string(b), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func quietLog(buf *bytes.Buffer) *log.Logger { return log.New(buf, "", 0) }

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestIgnitionAppliesWhatTheKubeadmBootstrapProviderWrites renders a worker's bootstrap data
// with Cluster API's own Ignition renderer (format: ignition) and applies it: the user with its
// sudo rule and keys, every write_files entry with its encoding, mode and owner, the kubeadm
// script and configuration, and kubeadm.service enabled for multi-user.target.
func TestIgnitionAppliesWhatTheKubeadmBootstrapProviderWrites(t *testing.T) {
	root := ignRoot(t)
	secret := "token: abcdef.0123456789abcdef\n"
	data, _, err := ignition.NewNode(&ignition.NodeInput{NodeInput: &cloudinit.NodeInput{
		BaseUserData: cloudinit.BaseUserData{
			Users: []bootstrapv1.User{{Name: "capov", Sudo: "ALL=(ALL) NOPASSWD:ALL",
				SSHAuthorizedKeys: []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvn capov@lab"}}},
			WriteFiles: []bootstrapv1.File{
				{Path: "/etc/kubernetes/plain.conf", Permissions: "0640", Owner: "root:root", Content: "plain: true\n"},
				{Path: "/etc/kubernetes/encoded.conf", Permissions: "0600", Owner: "capov:capov", Encoding: bootstrapv1.Base64,
					Content: base64.StdEncoding.EncodeToString([]byte(secret))},
			},
			PreKubeadmCommands:  []string{"echo before > /run/pre"},
			PostKubeadmCommands: []string{"echo after > /run/post"},
		},
		JoinConfiguration: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\n",
	}})
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	if err := runIgnition(root, data, quietLog(&logs)); err != nil {
		t.Fatalf("applying CABPK's Ignition config: %v\n%s", err, data)
	}
	at := func(p string) string { return filepath.Join(root, p) }

	if _, ok := lookupID(at("/etc/passwd"), "capov"); !ok {
		t.Error("the user capov was not created")
	}
	if got := read(t, at("/etc/sudoers.d/capov")); !strings.Contains(got, "capov ALL=(ALL) NOPASSWD:ALL") {
		t.Errorf("sudoers.d/capov = %q", got)
	}
	if got := read(t, at("/home/capov/.ssh/authorized_keys")); !strings.Contains(got, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBvn capov@lab") {
		t.Errorf("authorized_keys = %q", got)
	}
	if got := read(t, at("/etc/kubernetes/plain.conf")); got != "plain: true\n" {
		t.Errorf("plain.conf = %q", got)
	}
	if m := mode(t, at("/etc/kubernetes/plain.conf")); m != 0o640 {
		t.Errorf("plain.conf mode = %o, want 640", m)
	}
	if got := read(t, at("/etc/kubernetes/encoded.conf")); got != secret {
		t.Errorf("the base64 file is %q, want its decoded content %q", got, secret)
	}
	st, err := os.Stat(at("/etc/kubernetes/encoded.conf"))
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := lookupID(at("/etc/passwd"), "capov")
	if o := st.Sys().(*syscall.Stat_t); int(o.Uid) != uid {
		t.Errorf("encoded.conf is owned by uid %d, want capov's %d", o.Uid, uid)
	}
	script := read(t, at("/etc/kubeadm.sh"))
	for _, want := range []string{"echo before > /run/pre", "kubeadm join --config /etc/kubeadm.yml", "/run/cluster-api/bootstrap-success.complete", "echo after > /run/post"} {
		if !strings.Contains(script, want) {
			t.Errorf("/etc/kubeadm.sh lacks %q:\n%s", want, script)
		}
	}
	if m := mode(t, at("/etc/kubeadm.sh")); m != 0o700 {
		t.Errorf("kubeadm.sh mode = %o, want 700", m)
	}
	if got := read(t, at("/etc/kubeadm.yml")); !strings.Contains(got, "kind: JoinConfiguration") {
		t.Errorf("/etc/kubeadm.yml = %q", got)
	}
	u, err := loadUnit(root, "kubeadm.service")
	if err != nil {
		t.Fatal(err)
	}
	if u.typ != "oneshot" || len(u.execStart) != 1 || strings.Join(u.execStart[0].argv, " ") != "/bin/bash /etc/kubeadm.sh" {
		t.Errorf("kubeadm.service: type %s, ExecStart %v", u.typ, u.execStart)
	}
	if target, err := os.Readlink(at("/etc/systemd/system/multi-user.target.wants/kubeadm.service")); err != nil || target != "/etc/systemd/system/kubeadm.service" {
		t.Errorf("kubeadm.service is not enabled for multi-user.target: %q, %v", target, err)
	}
	if got := read(t, at("/etc/systemd/system-preset/20-ignition.preset")); got != "enable kubeadm.service\n" {
		t.Errorf("preset = %q", got)
	}
}

// TestIgnitionTheEnginesHostnameEntry: the Engine merges a spec 2.x entry (filesystem: root)
// for /etc/hostname into every config, spec 3 ones too; Ignition 3 only warns about the key.
func TestIgnitionTheEnginesHostnameEntry(t *testing.T) {
	for _, version := range []string{"2.3.0", "3.2.0"} {
		root := ignRoot(t)
		var logs bytes.Buffer
		cfg := `{"ignition":{"version":"` + version + `"},"storage":{"files":[{"filesystem":"root","path":"/etc/hostname","mode":420,"overwrite":true,"contents":{"source":"data:,node-a"}}]}}`
		if err := runIgnition(root, []byte(cfg), quietLog(&logs)); err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if got := read(t, filepath.Join(root, "etc/hostname")); got != "node-a" {
			t.Errorf("%s: /etc/hostname = %q", version, got)
		}
		if warned := strings.Contains(logs.String(), "Unused key filesystem"); warned != (version == "3.2.0") {
			t.Errorf("%s: warned about filesystem: %v (%q)", version, warned, logs.String())
		}
	}
}

// TestIgnitionContentsDecodedAndVerified: percent-escaped and base64 data URLs, gzip, the
// verification hash, spec 2's append and spec 3's overwrite rule.
func TestIgnitionContentsDecodedAndVerified(t *testing.T) {
	root := ignRoot(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = io.WriteString(zw, "zipped\n")
	_ = zw.Close()
	sum := sha512.Sum512([]byte("zipped\n"))
	if err := writeFile(filepath.Join(root, "etc/existing"), "first\n", 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := `{"ignition":{"version":"2.3.0"},"storage":{"files":[
	 {"filesystem":"root","path":"/etc/a","contents":{"source":"data:,a%20b%0Ac"}},
	 {"filesystem":"root","path":"/etc/z","mode":384,"contents":{"source":"data:;base64,` + base64.StdEncoding.EncodeToString(gz.Bytes()) + `","compression":"gzip","verification":{"hash":"sha512-` + hex.EncodeToString(sum[:]) + `"}}},
	 {"filesystem":"root","path":"/etc/existing","append":true,"contents":{"source":"data:,second%0A"}}],
	 "directories":[{"filesystem":"root","path":"/var/lib/x/y","mode":448}],
	 "links":[{"filesystem":"root","path":"/etc/l","target":"/etc/a"}]}}`
	var logs bytes.Buffer
	if err := runIgnition(root, []byte(cfg), quietLog(&logs)); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{"etc/a": "a b\nc", "etc/z": "zipped\n", "etc/existing": "first\nsecond\n"} {
		if got := read(t, filepath.Join(root, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if m := mode(t, filepath.Join(root, "etc/z")); m != 0o600 {
		t.Errorf("/etc/z mode %o, want 600", m)
	}
	if m := mode(t, filepath.Join(root, "etc/a")); m != 0o644 {
		t.Errorf("/etc/a mode %o, want the default 644", m)
	}
	if m := mode(t, filepath.Join(root, "var/lib/x/y")); m != 0o700 {
		t.Errorf("directory mode %o, want 700", m)
	}
	if target, err := os.Readlink(filepath.Join(root, "etc/l")); err != nil || target != "/etc/a" {
		t.Errorf("link: %q %v", target, err)
	}

	bad := `{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/bad","contents":{"source":"data:,x","verification":{"hash":"sha512-00"}}}]}}`
	if err := runIgnition(root, []byte(bad), quietLog(&logs)); err == nil || !strings.Contains(err.Error(), "storage.files[0] (/etc/bad)") || !strings.Contains(err.Error(), "verification.hash") {
		t.Errorf("a wrong hash: %v", err)
	}
	v3 := `{"ignition":{"version":"3.1.0"},"storage":{"files":[{"path":"/etc/existing","contents":{"source":"data:,new"}}]}}`
	if err := runIgnition(root, []byte(v3), quietLog(&logs)); err == nil || !strings.Contains(err.Error(), "overwrite is false") {
		t.Errorf("spec 3 replacing a file without overwrite: %v", err)
	}
}

// TestIgnitionRefusesWhatItCannotApply: each directive the lab's Ignition cannot carry out
// fails with a message naming it, never skipped.
func TestIgnitionRefusesWhatItCannotApply(t *testing.T) {
	cases := map[string]struct{ cfg, want string }{
		"unknown key":     {`{"ignition":{"version":"2.3.0"},"storage":{"filez":[]}}`, `unknown field "filez"`},
		"no version":      {`{"storage":{}}`, "ignition.version is missing"},
		"spec 1":          {`{"ignition":{"version":"1.0.0"}}`, `ignition.version "1.0.0"`},
		"remote source":   {`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/r","contents":{"source":"https://example.com/r"}}]}}`, "storage.files[0] (/etc/r) contents: source https://"},
		"disks":           {`{"ignition":{"version":"3.0.0"},"storage":{"disks":[{"device":"/dev/sdb"}]}}`, "storage.disks"},
		"filesystems":     {`{"ignition":{"version":"2.3.0"},"storage":{"filesystems":[{"name":"data"}]}}`, "storage.filesystems"},
		"other fs":        {`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"oem","path":"/x"}]}}`, `storage.files[0] (/x): filesystem "oem"`},
		"config merge":    {`{"ignition":{"version":"3.0.0","config":{"merge":[{"source":"https://x"}]}}}`, "ignition.config"},
		"networkd":        {`{"ignition":{"version":"2.3.0"},"networkd":{"units":[{"name":"a.network"}]}}`, "networkd.units"},
		"mount unit":      {`{"ignition":{"version":"2.3.0"},"systemd":{"units":[{"name":"data.mount","enabled":true,"contents":"[Mount]\nWhat=/dev/sdb\n"}]}}`, "systemd.units[0] (data.mount)"},
		"compression":     {`{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/c","contents":{"source":"data:,x","compression":"xz"}}]}}`, `compression "xz"`},
		"delete user":     {`{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"old","shouldExist":false}]}}`, "passwd.users[0] (old): shouldExist"},
		"kernel args":     {`{"ignition":{"version":"3.3.0"},"kernelArguments":{"shouldExist":["quiet"]}}`, "kernelArguments"},
		"not json at all": {`#cloud-config`, "the Ignition config"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			root := ignRoot(t)
			var logs bytes.Buffer
			err := runIgnition(root, []byte(c.cfg), quietLog(&logs))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}
