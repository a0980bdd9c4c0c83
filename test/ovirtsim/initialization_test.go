package ovirtsim_test

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

// createWithInit creates a VM from a template with an initialization.
func createWithInit(t testing.TB, conn *ovirtsdk.Connection, name, template, osType, script, host string) string {
	t.Helper()
	b := vmBuilder(name, template, "Default").
		InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript(script).HostName(host))
	if osType != "" {
		b.OsBuilder(ovirtsdk.NewOperatingSystemBuilder().Type(osType))
	}
	r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).Send()
	if err != nil {
		t.Fatalf("creating VM %s: %v", name, err)
	}
	return r.MustVm().MustId()
}

func TestIgnitionRequiredForRHCOS(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)
	const ign = `{"ignition":{"version":"3.2.0"},"passwd":{}}`
	cases := []struct {
		name, template, osType, script string
		detail                         string // "" means the VM starts
	}{
		{"cloud-config on rhcos", "rhcos-4.14", "", "#cloud-config\nruncmd: [true]\n",
			"[Cannot run VM. Failed to build ignition data: custom_script is not a JSON Ignition config"},
		{"JSON without ignition.version: the Engine adds it", "rhcos-4.14", "", `{"ignition":{}}`, ""},
		{"a JSON array", "rhcos-4.14", "", `[1]`, "Failed to build ignition data"},
		{"the VM's own os type counts", "ubuntu-22.04", "rhcos_x64", "## template: jinja\n#cloud-config\n", "Failed to build ignition data"},
		{"an Ignition config", "rhcos-4.14", "", ign, ""},
		{"no custom script: the engine's own config", "rhcos-4.14", "", "", ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			id := createWithInit(t, conn, "ign"+string(rune('a'+i)), tc.template, tc.osType, tc.script, "node.example.com")
			// The demo seed's ubuntu-22.04 has no guest agent (slow powering_up); this VM has one.
			g.Expect(sim.SetVMGuestAgent(id, true)).To(Succeed())
			vms := conn.SystemService().VmsService().VmService(id)
			_, err := vms.Start().Send()
			if tc.detail != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.detail)))
				g.Expect(err).To(MatchError(ContainSubstring(`HTTP response code is "400"`)))
				g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_DOWN), "the VM never starts")
				_, err = sim.Initialization(id)
				g.Expect(err).To(MatchError(ovirtsim.ErrConflict))
				// Fixing the script makes the next start the first run.
				_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript(ign)).MustBuild()).Send()
				g.Expect(err).NotTo(HaveOccurred())
				_, err = vms.Start().Send()
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vmStatus(t, conn, id)).To(Equal(ovirtsdk.VMSTATUS_UP))
			in, err := sim.Initialization(id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(in.Format).To(Equal(ovirtsim.InitFormatIgnition))
			g.Expect(in.OSType).To(Equal("rhcos_x64"))
			var cfg struct {
				Ignition struct{ Version string } `json:"ignition"`
			}
			g.Expect(json.Unmarshal([]byte(in.UserData), &cfg)).To(Succeed())
			g.Expect(cfg.Ignition.Version).NotTo(BeEmpty())
			if tc.script == "" || tc.script == `{"ignition":{}}` {
				g.Expect(cfg.Ignition.Version).To(Equal("2.3.0"), "osinfo: ignition_2.3.0")
				g.Expect(in.UserData).To(ContainSubstring("/etc/hostname"))
			}
		})
	}
}

// TestIgnitionConfigAsTheEngineEditsIt: IgnitionHandler adds the version when it is missing,
// merges the VM's host name as an /etc/hostname entry (re-serialising the config, storage
// first) unless the config writes /etc/hostname itself, replaces a storage without files by
// that entry alone, and cannot merge a user without a root password.
func TestIgnitionConfigAsTheEngineEditsIt(t *testing.T) {
	sim := startSim(t)
	conn := connect(t, sim)
	const entry = `{"filesystem":"root","path":"/etc/hostname","mode":420,"contents":{"source":"data:,n1"}}`
	cases := []struct{ name, script, host, want string }{
		{"files: the entry appended, storage first",
			`{"ignition": {"version": "2.3.0"}, "systemd": {"units": []}, "storage": {"directories": [], "files": [{"filesystem": "root", "path": "/etc/a"}]}}`, "n1",
			`{"storage":{"directories":[],"files":[{"filesystem":"root","path":"/etc/a"},` + entry + `]},"ignition":{"version":"2.3.0"},"systemd":{"units":[]}}`},
		{"the config's own /etc/hostname wins: untouched",
			`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,mine"}}]}}`, "n1",
			`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,mine"}}]}}`},
		{"storage without files: replaced by the entry",
			`{"ignition":{"version":"2.3.0"},"storage":{"directories":[{"filesystem":"root","path":"/d"}]}}`, "n1",
			`{"ignition":{"version":"2.3.0"},"storage":{"files":[` + entry + `]}}`},
		{"no storage: added last", `{"ignition":{"version":"2.3.0"}}`, "n1",
			`{"ignition":{"version":"2.3.0"},"storage":{"files":[` + entry + `]}}`},
		{"no host name, version present: as it is", `{"ignition": {"version": "2.3.0"}}`, "",
			`{"ignition": {"version": "2.3.0"}}`},
		{"no version: ignition first, with the config's own keys", `{"passwd":{},"ignition":{"timeouts":{}}}`, "",
			`{"ignition":{"timeouts":{},"version":"2.3.0"},"passwd":{}}`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			id := createWithInit(t, conn, "ignedit"+string(rune('a'+i)), "rhcos-4.14", "", tc.script, tc.host)
			g.Expect(sim.SetVMGuestAgent(id, true)).To(Succeed())
			_, err := conn.SystemService().VmsService().VmService(id).Start().Send()
			g.Expect(err).NotTo(HaveOccurred())
			in, err := sim.Initialization(id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(in.UserData).To(Equal(tc.want))
		})
	}
	t.Run("a user name without a root password", func(t *testing.T) {
		g := NewWithT(t)
		b := vmBuilder("igneditu", "rhcos-4.14", "Default").InitializationBuilder(ovirtsdk.NewInitializationBuilder().
			CustomScript(`{"ignition":{"version":"2.3.0"}}`).UserName("core"))
		r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).Send()
		g.Expect(err).NotTo(HaveOccurred())
		_, err = conn.SystemService().VmsService().VmService(r.MustVm().MustId()).Start().Send()
		g.Expect(err).To(MatchError(ContainSubstring("Failed to build ignition data")))
	})
}

func TestCloudInitComposedUserData(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)
	script := "## template: jinja\n#cloud-config\nruncmd:\n- echo {{ ds.meta_data.local_hostname }}\n"
	b := vmBuilder("ci", "ubuntu-22.04", "Default").InitializationBuilder(ovirtsdk.NewInitializationBuilder().
		CustomScript(script).HostName("worker-0.example.com").UserName("core").AuthorizedSshKeys("ssh-ed25519 AAAA core@x"))
	r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	id := r.MustVm().MustId()
	vms := conn.SystemService().VmsService().VmService(id)

	_, err = sim.Initialization(id)
	g.Expect(err).To(MatchError(ContainSubstring("has not run yet")))
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	in, err := sim.Initialization(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(in.Format).To(Equal(ovirtsim.InitFormatCloudInit))
	g.Expect(in.OSType).To(Equal("other_linux"))
	lines := strings.Split(in.UserData, "\n")
	g.Expect(lines[0]).To(Equal("#cloud-config"), "the engine's header comes first")
	g.Expect(in.UserData).To(HaveSuffix(script), "custom_script is appended verbatim")
	g.Expect(in.UserData).NotTo(HavePrefix("## template: jinja"), "Jinja is no longer the first line: it stays literal")
	// The host name and the keys go to the meta data (CloudInitHandler.storeHostname,
	// storeAuthorizedKeys), where cloud-init reads local-hostname and public-keys; the user
	// name goes to the user data's map.
	g.Expect(in.UserData).To(ContainSubstring("user: core\n"))
	g.Expect(in.UserData).To(ContainSubstring("disable_root: 0\n"))
	g.Expect(in.UserData).NotTo(ContainSubstring("worker-0.example.com"))
	var md map[string]any
	g.Expect(json.Unmarshal([]byte(in.MetaData), &md)).To(Succeed())
	g.Expect(md).To(HaveKeyWithValue("hostname", "worker-0.example.com"))
	g.Expect(md).To(HaveKeyWithValue("name", "worker-0.example.com"))
	g.Expect(md).To(HaveKeyWithValue("public_keys", ConsistOf("ssh-ed25519 AAAA core@x")))
	g.Expect(md).To(HaveKeyWithValue("uuid", MatchRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)))
	drive := map[string]string{}
	for _, f := range in.ConfigDrive() {
		drive[f.Path] = f.Data
	}
	g.Expect(drive).To(Equal(map[string]string{ovirtsim.ConfigDriveMetaData: in.MetaData, ovirtsim.ConfigDriveUserData: in.UserData}),
		"no network_data.json without network configuration")

	st, body := admin(t, sim, "GET", "/sim/vms/"+id+"/initialization", "")
	g.Expect(st).To(Equal(200), body)
	var viaAdmin ovirtsim.VMInitialization
	g.Expect(json.Unmarshal([]byte(body), &viaAdmin)).To(Succeed())
	g.Expect(viaAdmin.UserData).To(Equal(in.UserData))
	g.Expect(viaAdmin.Format).To(Equal("cloud-init"))
	st, _ = admin(t, sim, "GET", "/sim/vms/nope/initialization", "")
	g.Expect(st).To(Equal(404))

	// Only the first run applies the initialization.
	_, err = vms.Stop().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vms.Update().Vm(ovirtsdk.NewVmBuilder().InitializationBuilder(ovirtsdk.NewInitializationBuilder().CustomScript("#cloud-config\n")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vms.Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	again, err := sim.Initialization(id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(in))

	// A VM without any initialization composes nothing.
	plain := createVM(t, conn, "plain", false)
	_, err = conn.SystemService().VmsService().VmService(plain).Start().Send()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = sim.Initialization(plain)
	g.Expect(err).To(MatchError(ContainSubstring("ran without initialization")))
	st, _ = admin(t, sim, "GET", "/sim/vms/"+plain+"/initialization", "")
	g.Expect(st).To(Equal(409))
}
