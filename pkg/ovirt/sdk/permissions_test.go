package sdk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// The Engine account's permissions, as docs/operations.md lists them ("The Engine account's
// permissions"), checked against the simulator's per-user permissions: the documented grant
// does everything CAPOV does, and each documented action group is needed by exactly the
// operations the table names.

// permissionStep is one thing CAPOV does on the Engine, and the action group it needs.
type permissionStep struct {
	name  string
	needs []string // action groups
	run   func(ctx context.Context, w *permissionWorld, c ovirt.Client) error
}

// permissionWorld is what the steps work on: objects looked up by the administrator, and a VM
// the administrator created (an account acting on a VM it did not create, as after clusterctl
// move or a change of the provider's account).
type permissionWorld struct {
	cluster              *ovirt.Cluster
	tpl                  *ovirt.Template
	fast                 *ovirt.StorageDomain
	public, restricted   *ovirt.VnicProfile
	vm, grouped          *ovirt.VM
	csiDisk, osDisk, tag string
	nicID                string
	groupID              string
	admin                ovirt.Client
	prefix               string // of every name, unique per world
	seq                  int
}

func (w *permissionWorld) name(what string) string {
	w.seq++
	return fmt.Sprintf("%s-%s-%d", w.prefix, what, w.seq)
}

func permissionSteps() []permissionStep {
	return []permissionStep{
		{"create a VM from a template", []string{ovirtsim.ActionCreateVM}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_, err := c.CreateVM(ctx, ovirt.VMSpec{Name: w.name("thin"), ClusterID: w.cluster.ID, TemplateID: w.tpl.ID})
			return err
		}},
		{"clone a VM to storagedomainname", []string{ovirtsim.ActionCreateVM, ovirtsim.ActionCreateDisk}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_, err := c.CreateVM(ctx, ovirt.VMSpec{Name: w.name("clone"), ClusterID: w.cluster.ID, TemplateID: w.tpl.ID,
				Clone: true, StorageDomainID: w.fast.ID, TemplateDisks: w.tpl.Disks})
			return err
		}},
		{"size the OS disk", []string{ovirtsim.ActionEditDiskProperties}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.UpdateDisk(ctx, w.vm.ID, w.osDisk, ovirt.DiskUpdate{ProvisionedSize: 20 << 30})
		}},
		{"add a NIC", []string{ovirtsim.ActionConfigureVMNetwork}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			n, err := c.AddNIC(ctx, w.vm.ID, w.name("nic"), w.public.ID)
			if err == nil {
				w.nicID = n.ID
			}
			return err
		}},
		{"add a NIC on a profile Everyone cannot use", []string{ovirtsim.ActionConfigureVMNetwork}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_, err := c.AddNIC(ctx, w.vm.ID, w.name("nic"), w.restricted.ID)
			return err
		}},
		{"change a NIC's profile", []string{ovirtsim.ActionConfigureVMNetwork}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.UpdateNIC(ctx, w.vm.ID, w.vm.NICs[0].ID, w.restricted.ID)
		}},
		{"remove a NIC", []string{ovirtsim.ActionConfigureVMNetwork}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.RemoveNIC(ctx, w.vm.ID, w.vm.NICs[0].ID)
		}},
		{"clear the bootstrap data", []string{ovirtsim.ActionEditVMProperties}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.UpdateVM(ctx, w.vm.ID, ovirt.VMUpdate{ClearCustomScript: true})
		}},
		{"start", []string{ovirtsim.ActionRunVM}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.Power(ctx, w.vm.ID, ovirt.PowerStart)
		}},
		{"start with the bootstrap data (run once)", []string{ovirtsim.ActionRunVM}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_ = w.admin.Power(ctx, w.vm.ID, ovirt.PowerStop) // whether the user could start it or not
			return c.RunOnce(ctx, w.vm.ID, "#cloud-config\n")
		}},
		{"shut down", []string{ovirtsim.ActionShutDownVM}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_ = w.admin.Power(ctx, w.vm.ID, ovirt.PowerStart) // whether the user could start it or not
			return c.Power(ctx, w.vm.ID, ovirt.PowerShutdown)
		}},
		{"stop", []string{ovirtsim.ActionStopVM}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_ = w.admin.Power(ctx, w.vm.ID, ovirt.PowerStart)
			return c.Power(ctx, w.vm.ID, ovirt.PowerStop)
		}},
		{"reboot (remediation)", []string{ovirtsim.ActionRebootVM}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_ = w.admin.Power(ctx, w.vm.ID, ovirt.PowerStart)
			return c.Power(ctx, w.vm.ID, ovirt.PowerReboot)
		}},
		{"reset (remediation)", []string{ovirtsim.ActionResetVM}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_ = w.admin.Power(ctx, w.vm.ID, ovirt.PowerStart)
			return c.Power(ctx, w.vm.ID, ovirt.PowerReset)
		}},
		{"add a data disk", []string{ovirtsim.ActionConfigureVMStorage, ovirtsim.ActionCreateDisk}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_ = w.admin.Power(ctx, w.vm.ID, ovirt.PowerStop) // whether the user could stop it or not
			_, err := c.AddDisk(ctx, w.vm.ID, ovirt.DiskSpec{Alias: w.name("data"), SizeBytes: 1 << 30, StorageDomainID: w.fast.ID,
				Format: ovirt.DiskFormatCow, Sparse: true})
			return err
		}},
		{"assign a tag to the VM", []string{ovirtsim.ActionTagManagement}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.AssignTag(ctx, w.vm.ID, w.tag)
		}},
		{"detach a disk that is not the VM's own", []string{ovirtsim.ActionConfigureVMStorage}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.DetachDisk(ctx, w.vm.ID, w.csiDisk)
		}},
		{"remove the VM", []string{ovirtsim.ActionDeleteVM}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_ = w.admin.Power(ctx, w.vm.ID, ovirt.PowerStop) // whether the user could stop it or not
			return c.RemoveVM(ctx, w.vm.ID)
		}},
		{"create an affinity group", []string{ovirtsim.ActionManipulateAffinityGroups}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_, err := c.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: w.cluster.ID, Name: w.name("capov-cp")})
			return err
		}},
		{"add a VM to an affinity group", []string{ovirtsim.ActionManipulateAffinityGroups}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.AddVMToAffinityGroup(ctx, w.cluster.ID, w.groupID, w.grouped.ID)
		}},
		{"make an affinity group enforcing", []string{ovirtsim.ActionManipulateAffinityGroups}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.UpdateAffinityGroup(ctx, w.cluster.ID, w.groupID, true)
		}},
		{"remove an affinity group", []string{ovirtsim.ActionManipulateAffinityGroups}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.RemoveAffinityGroup(ctx, w.cluster.ID, w.groupID)
		}},
		{"create the heartbeat tag", []string{ovirtsim.ActionTagManagement}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			_, err := c.CreateTag(ctx, w.name("capov-heartbeat"), "")
			return err
		}},
		{"beat the heartbeat", []string{ovirtsim.ActionTagManagement}, func(ctx context.Context, w *permissionWorld, c ovirt.Client) error {
			return c.UpdateTagDescription(ctx, w.tag, w.name("beat"))
		}},
	}
}

// documentedGroups are the action groups of the minimal custom role docs/operations.md
// describes, by the object it is granted on.
func documentedGrants(without string) []ovirtsim.Grant {
	keep := func(groups ...string) []string {
		return slices.DeleteFunc(groups, func(g string) bool { return g == without })
	}
	grants := []ovirtsim.Grant{
		{Cluster: "Default", ActionGroups: keep(ovirtsim.ActionCreateVM, ovirtsim.ActionEditDiskProperties,
			ovirtsim.ActionConfigureVMNetwork, ovirtsim.ActionEditVMProperties, ovirtsim.ActionRunVM,
			ovirtsim.ActionShutDownVM, ovirtsim.ActionStopVM, ovirtsim.ActionRebootVM, ovirtsim.ActionResetVM, ovirtsim.ActionConfigureVMStorage,
			ovirtsim.ActionDeleteVM, ovirtsim.ActionManipulateAffinityGroups)},
		{Template: "rhcos-4.14", ActionGroups: keep(ovirtsim.ActionCreateVM)},
		{StorageDomain: "fast", ActionGroups: keep(ovirtsim.ActionCreateDisk)},
		{VnicProfile: "restricted", ActionGroups: keep(ovirtsim.ActionConfigureVMNetwork)},
		{ActionGroups: keep(ovirtsim.ActionTagManagement)}, // the system object
	}
	return slices.DeleteFunc(grants, func(g ovirtsim.Grant) bool { return len(g.ActionGroups) == 0 })
}

func TestEachDocumentedEnginePermissionIsNeededAndTheDocumentedGrantIsEnough(t *testing.T) {
	ctx := context.Background()
	sim := newSim(t, func(b *ovirtsim.Builder) {
		b.WithVnicProfile(ovirtsim.VnicProfile{Name: "restricted", Network: "storage", Private: true})
	})
	e := newEnv(t, sim, Options{})
	adminClient, err := e.f.ForProvider(ctx, e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	steps := permissionSteps()

	// run sets up a fresh world with the administrator, then runs every step as user.
	run := func(g Gomega, user string, grants []ovirtsim.Grant) map[string]error {
		g.Expect(sim.AddUser(ovirtsim.User{Username: user, Password: "pw", Grants: grants})).To(Succeed())
		cfg := e.cfg
		cfg.Provider, cfg.Credentials = "as-"+user, ovirt.Credentials{Username: user, Password: "pw"}
		c, err := e.f.ForProvider(ctx, cfg)
		g.Expect(err).NotTo(HaveOccurred())
		w := &permissionWorld{admin: adminClient, prefix: strings.Split(user, "@")[0]}
		w.cluster, err = adminClient.FindCluster(ctx, "Default")
		g.Expect(err).NotTo(HaveOccurred())
		w.tpl, err = adminClient.FindTemplate(ctx, "rhcos-4.14", "")
		g.Expect(err).NotTo(HaveOccurred())
		w.fast, err = adminClient.FindStorageDomain(ctx, "fast")
		g.Expect(err).NotTo(HaveOccurred())
		w.public, err = adminClient.FindVnicProfile(ctx, w.cluster, "ovirtmgmt")
		g.Expect(err).NotTo(HaveOccurred())
		w.restricted, err = adminClient.FindVnicProfile(ctx, w.cluster, "restricted")
		g.Expect(err).NotTo(HaveOccurred())
		for _, vm := range []**ovirt.VM{&w.vm, &w.grouped} {
			created, err := adminClient.CreateVM(ctx, ovirt.VMSpec{Name: w.name("admins"), ClusterID: w.cluster.ID,
				TemplateID: w.tpl.ID, CustomScript: "{}"})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = adminClient.AddNIC(ctx, created.ID, "extra", w.public.ID)
			g.Expect(err).NotTo(HaveOccurred())
			*vm, err = adminClient.GetVM(ctx, created.ID)
			g.Expect(err).NotTo(HaveOccurred())
		}
		w.osDisk = w.vm.Disks[0].ID
		w.csiDisk, err = sim.AttachCSIDisk(w.vm.ID, 1)
		g.Expect(err).NotTo(HaveOccurred())
		grp, err := adminClient.CreateAffinityGroup(ctx, ovirt.AffinityGroupSpec{ClusterID: w.cluster.ID, Name: w.name("group")})
		g.Expect(err).NotTo(HaveOccurred())
		w.groupID = grp.ID
		tag, err := adminClient.CreateTag(ctx, w.name("heartbeat"), "")
		g.Expect(err).NotTo(HaveOccurred())
		w.tag = tag.ID

		errs := map[string]error{}
		for _, s := range steps {
			if s.name == "remove an affinity group" {
				// The group must still hold the VM for the step before it to mean anything.
				_ = adminClient.RemoveVMFromAffinityGroup(ctx, w.cluster.ID, w.groupID, w.grouped.ID)
			}
			errs[s.name] = s.run(ctx, w, c)
		}
		return errs
	}

	type permissionCase struct {
		name    string
		grants  []ovirtsim.Grant
		refused func(permissionStep) bool
	}
	cases := []permissionCase{{name: "the documented grant", grants: documentedGrants(""),
		refused: func(permissionStep) bool { return false }}}
	groups := map[string]bool{}
	for _, s := range steps {
		for _, group := range s.needs {
			if !groups[group] {
				groups[group] = true
				cases = append(cases, permissionCase{name: "without " + group, grants: documentedGrants(group),
					refused: func(o permissionStep) bool { return slices.Contains(o.needs, group) }})
			}
		}
	}
	// CREATE_VM is needed on the template too, CONFIGURE_VM_NETWORK on the profile too.
	withoutGrantOn := func(object func(ovirtsim.Grant) bool) []ovirtsim.Grant {
		return slices.DeleteFunc(documentedGrants(""), object)
	}
	cases = append(cases,
		permissionCase{name: "without the grant on the template",
			grants: withoutGrantOn(func(g ovirtsim.Grant) bool { return g.Template != "" }),
			refused: func(o permissionStep) bool {
				return strings.Contains(o.name, "create a VM") || strings.Contains(o.name, "clone")
			}},
		permissionCase{name: "without the grant on the restricted profile",
			grants: withoutGrantOn(func(g ovirtsim.Grant) bool { return g.VnicProfile != "" }),
			refused: func(o permissionStep) bool {
				return o.name == "add a NIC on a profile Everyone cannot use" || o.name == "change a NIC's profile"
			}})
	g := NewWithT(t)
	g.Expect(cases).To(HaveLen(17), "the documented grant, 14 action groups, 2 objects")
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := run(g, fmt.Sprintf("user-%d@internal", i), tc.grants)
			for _, s := range steps {
				err := errs[s.name]
				if !tc.refused(s) {
					g.Expect(err).NotTo(HaveOccurred(), s.name)
					continue
				}
				g.Expect(isRefusal(err)).To(BeTrue(), "%s: %v", s.name, err)
				var oe *ovirt.Error
				g.Expect(errors.As(err, &oe)).To(BeTrue())
				g.Expect(oe.Detail).To(ContainSubstring("User is not authorized to perform this action."))
			}
		})
	}
}

// isRefusal reports the Engine's answer to an account that lacks a permission.
func isRefusal(err error) bool {
	var oe *ovirt.Error
	return errors.As(err, &oe) && oe.Status == 403 && errors.Is(err, ovirt.ErrAuth)
}

func TestTheCreatorOfAVMMayManageItWithoutAnyRoleOnItsCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	// VmCreator on the cluster and UserTemplateBasedVm on the template: the Engine makes the
	// creator of a VM its UserVmManager (AddVmCommand.addVmPermission).
	g.Expect(sim.AddUser(ovirtsim.User{Username: "creator@internal", Password: "pw", Grants: []ovirtsim.Grant{
		{Role: "VmCreator", Cluster: "Default"}, {Role: "UserTemplateBasedVm", Template: "rhcos-4.14"}}})).To(Succeed())
	e := newEnv(t, sim, Options{})
	admin, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	cfg := e.cfg
	cfg.Provider, cfg.Credentials = "creator", ovirt.Credentials{Username: "creator@internal", Password: "pw"}
	c, err := e.f.ForProvider(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())

	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	mine, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "mine", ClusterID: cluster.ID, TemplateID: tpl.ID})
	g.Expect(err).NotTo(HaveOccurred())
	theirs, err := admin.CreateVM(ctx, ovirt.VMSpec{Name: "theirs", ClusterID: cluster.ID, TemplateID: tpl.ID})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(c.Power(ctx, mine.ID, ovirt.PowerStart)).To(Succeed())
	g.Expect(c.Power(ctx, mine.ID, ovirt.PowerStop)).To(Succeed())
	g.Expect(c.RemoveVM(ctx, mine.ID)).To(Succeed())
	g.Expect(isRefusal(c.Power(ctx, theirs.ID, ovirt.PowerStart))).To(BeTrue(), "a VM another account created")
	g.Expect(isRefusal(c.RemoveVM(ctx, theirs.ID))).To(BeTrue())
}
