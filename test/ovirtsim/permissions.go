package ovirtsim

import (
	"fmt"
	"slices"
)

// Per-user permissions, as ovirt-engine checks them before it validates a command
// (CommandBase.internalValidate: isUserAuthorizedToRunAction, then validate): each command
// names the action groups it needs on which objects (getPermissionCheckSubjects), and the user
// must hold a role with that action group on the object or on one of its parents
// (MultiLevelAdministrationHandler over fn_get_entity_parents: a VM's parents are its cluster,
// the cluster's data center and the system; a disk's are its VM, the VM's cluster, its storage
// domain and the data center; a template's its data center; a vNIC profile's its network and
// data center). A refusal is USER_NOT_AUTHORIZED_TO_PERFORM_ACTION, error type NO_PERMISSION:
// HTTP 403, reason "Operation Failed", detail "[User is not authorized to perform this action.]".
//
// Only the write operations the simulator serves are checked; reads are not (the Engine
// answers an administrator's list unfiltered, and a user role's only with "Filter: true").
// The user of the seed (Seed.Username) is SuperUser on the system, as admin@internal is.

// Action groups the simulator checks (ovirt-engine's ActionGroup).
const (
	ActionCreateVM                 = "CREATE_VM"
	ActionDeleteVM                 = "DELETE_VM"
	ActionEditVMProperties         = "EDIT_VM_PROPERTIES"
	ActionConfigureVMNetwork       = "CONFIGURE_VM_NETWORK"
	ActionConfigureVMStorage       = "CONFIGURE_VM_STORAGE"
	ActionRebootVM                 = "REBOOT_VM"
	ActionStopVM                   = "STOP_VM"
	ActionShutDownVM               = "SHUT_DOWN_VM"
	ActionRunVM                    = "RUN_VM"
	ActionManipulatePermissions    = "MANIPULATE_PERMISSIONS"
	ActionCreateDisk               = "CREATE_DISK"
	ActionEditDiskProperties       = "EDIT_DISK_PROPERTIES"
	ActionDeleteDisk               = "DELETE_DISK"
	ActionTagManagement            = "TAG_MANAGEMENT"
	ActionManipulateAffinityGroups = "MANIPULATE_AFFINITY_GROUPS"
	// ActionEditAdminVMProperties is what AddVmHostDevices and RemoveVmHostDevices need.
	ActionEditAdminVMProperties = "EDIT_ADMIN_VM_PROPERTIES"
	// ActionResetVM is what ResetVm needs (upgrade/04_04_1060_add_reset_action_to_roles.sql).
	ActionResetVM = "RESET_VM"
)

// notAuthorizedWhy is USER_NOT_AUTHORIZED_TO_PERFORM_ACTION as the API answers it.
const notAuthorizedWhy = "[User is not authorized to perform this action.]"

// RoleGroups returns the action groups the simulator checks that a predefined role of the
// Engine has (packaging/dbscripts/data/00700_insert_roles_groups.sql, restricted to the groups
// above), and whether the role is known.
func RoleGroups(role string) ([]string, bool) {
	vmUser := []string{ActionCreateVM, ActionDeleteVM, ActionEditVMProperties, ActionConfigureVMNetwork,
		ActionConfigureVMStorage, ActionRebootVM, ActionStopVM, ActionShutDownVM, ActionRunVM,
		ActionManipulatePermissions, ActionCreateDisk, ActionEditDiskProperties, ActionDeleteDisk}
	switch role {
	case "SuperUser", "ClusterAdmin", "DataCenterAdmin":
		return append(vmUser, ActionTagManagement, ActionManipulateAffinityGroups, ActionEditAdminVMProperties, ActionResetVM), true
	case "UserVmManager":
		return append(vmUser, ActionResetVM), true
	case "VmCreator", "PowerUserRole":
		return []string{ActionCreateVM, ActionCreateDisk}, true
	case "DiskCreator":
		return []string{ActionCreateDisk}, true
	case "DiskOperator":
		return []string{ActionCreateDisk, ActionEditDiskProperties, ActionDeleteDisk, ActionManipulatePermissions}, true
	case "StorageAdmin":
		return []string{ActionCreateDisk, ActionEditDiskProperties, ActionDeleteDisk, ActionTagManagement}, true
	case "UserTemplateBasedVm":
		return []string{ActionCreateVM}, true
	case "VnicProfileUser":
		return []string{ActionConfigureVMNetwork}, true
	case "TagManager":
		return []string{ActionTagManagement}, true
	case "UserRole":
		return []string{ActionRebootVM, ActionStopVM, ActionShutDownVM, ActionRunVM, ActionResetVM}, true
	}
	return nil, false
}

// adminRoles are the predefined roles of RoleType ADMIN: a user holding one anywhere is an
// administrator (DbUser.isAdmin), who may run the Engine's admin queries. A custom role
// (Grant.ActionGroups alone) counts as a user role.
var adminRoles = []string{"SuperUser", "ClusterAdmin", "DataCenterAdmin", "StorageAdmin", "TagManager"}

// User is an Engine account besides the seed's administrator.
type User struct {
	// Username and Password are what the SSO login takes ("capov@internal").
	Username string `json:"username"`
	Password string `json:"password"`
	// Grants are the user's permissions.
	Grants []Grant `json:"grants,omitempty"`
}

// Grant is one permission: a role on an object.
type Grant struct {
	// Role is a predefined role of the Engine (see RoleGroups); empty with ActionGroups: a
	// custom role of exactly those action groups.
	Role         string   `json:"role,omitempty"`
	ActionGroups []string `json:"action_groups,omitempty"`
	// The object, by name: at most one of these; none is the system object (a system-wide
	// grant). A template name means its latest version.
	DataCenter    string `json:"data_center,omitempty"`
	Cluster       string `json:"cluster,omitempty"`
	StorageDomain string `json:"storage_domain,omitempty"`
	Template      string `json:"template,omitempty"`
	VnicProfile   string `json:"vnic_profile,omitempty"`
	VM            string `json:"vm,omitempty"`
}

// systemID is the id of the system object (Guid.SYSTEM).
const systemID = "aaa00000-0000-0000-0000-123456789aaa"

// grant is a Grant resolved: its action groups on an object id.
type grant struct {
	groups map[string]bool
	object string
}

// simUser is an account that is not the administrator. Guarded by Simulator.authMu.
type simUser struct {
	name, password string
	grants         []grant
	admin          bool // holds an administrator role (adminRoles)
}

// AddUser adds (or replaces) an account with the given permissions; its objects are looked up
// by name now. The seed's administrator cannot be replaced. Reset returns to the seed's users.
func (s *Simulator) AddUser(u User) error {
	s.mu.RLock()
	su, err := s.inv.resolveUser(u)
	s.mu.RUnlock()
	if err != nil {
		return err
	}
	s.authMu.Lock()
	defer s.authMu.Unlock()
	if u.Username == s.username {
		return invalidf("user %q is the administrator", u.Username)
	}
	s.users[u.Username] = su
	return nil
}

// resolveUsers resolves the users of a seed.
func (inv *inventory) resolveUsers(users []User, admin string) (map[string]*simUser, error) {
	out := map[string]*simUser{}
	for _, u := range users {
		if u.Username == admin {
			return nil, invalidf("user %q is the administrator", u.Username)
		}
		su, err := inv.resolveUser(u)
		if err != nil {
			return nil, err
		}
		out[u.Username] = su
	}
	return out, nil
}

// resolveUser checks a User and resolves its grants' objects.
func (inv *inventory) resolveUser(u User) (*simUser, error) {
	if u.Username == "" || u.Password == "" {
		return nil, invalidf("a user needs a username and a password")
	}
	su := &simUser{name: u.Username, password: u.Password}
	for i, g := range u.Grants {
		r, err := inv.resolveGrant(g)
		if err != nil {
			return nil, fmt.Errorf("user %s, grant %d: %w", u.Username, i, err)
		}
		su.grants = append(su.grants, r)
		su.admin = su.admin || slices.Contains(adminRoles, g.Role)
	}
	return su, nil
}

func (inv *inventory) resolveGrant(g Grant) (grant, error) {
	groups := g.ActionGroups
	if g.Role != "" {
		rg, ok := RoleGroups(g.Role)
		if !ok {
			return grant{}, invalidf("unknown role %q", g.Role)
		}
		groups = append(slices.Clone(groups), rg...)
	}
	if len(groups) == 0 {
		return grant{}, invalidf("a grant needs a role or action groups")
	}
	r := grant{groups: map[string]bool{}, object: systemID}
	for _, a := range groups {
		r.groups[a] = true
	}
	named := 0
	find := func(kind, name string, id func() string) error {
		if name == "" {
			return nil
		}
		named++
		if r.object = id(); r.object == "" {
			return invalidf("no %s named %q", kind, name)
		}
		return nil
	}
	errs := []error{
		find("data center", g.DataCenter, func() string {
			if dc := inv.dcByName[g.DataCenter]; dc != nil {
				return dc.id
			}
			return ""
		}),
		find("cluster", g.Cluster, func() string {
			if c := inv.clusterByName[g.Cluster]; c != nil {
				return c.id
			}
			return ""
		}),
		find("storage domain", g.StorageDomain, func() string {
			if sd := inv.sdByName[g.StorageDomain]; sd != nil {
				return sd.id
			}
			return ""
		}),
		find("template", g.Template, func() string {
			var latest *template
			for _, t := range inv.templates {
				if t.name == g.Template && (latest == nil || t.version > latest.version) {
					latest = t
				}
			}
			if latest == nil {
				return ""
			}
			return latest.id
		}),
		find("vNIC profile", g.VnicProfile, func() string {
			for _, p := range inv.profiles {
				if p.name == g.VnicProfile {
					return p.id
				}
			}
			return ""
		}),
		find("VM", g.VM, func() string {
			if v := inv.vmByExactName(g.VM); v != nil {
				return v.id
			}
			return ""
		}),
	}
	for _, err := range errs {
		if err != nil {
			return grant{}, err
		}
	}
	if named > 1 {
		return grant{}, invalidf("a grant names at most one object")
	}
	return r, nil
}

// need is one permission check subject: an action group on an object.
type need struct {
	group  string
	object []string // the object's id and its parents' (fn_get_entity_parents)
	// everyone: the Engine's group Everyone holds the action group on the object.
	everyone bool
}

func (inv *inventory) vmObject(v *vm) []string {
	return []string{v.id, v.cluster.id, v.cluster.dc.id, systemID}
}

func (inv *inventory) clusterObject(c *cluster) []string {
	return []string{c.id, c.dc.id, systemID}
}

func (inv *inventory) sdObject(sd *storageDomain) []string {
	return []string{sd.id, sd.dc.id, systemID}
}

func (inv *inventory) diskObject(d *disk) []string {
	ids := []string{d.id, systemID}
	if d.sd != nil {
		ids = append(ids, d.sd.id, d.sd.dc.id)
	}
	if d.vm != nil {
		ids = append(ids, d.vm.id, d.vm.cluster.id)
	}
	return ids
}

// profileNeed is CONFIGURE_VM_NETWORK on a vNIC profile. The Engine grants Everyone
// VnicProfileUser on the profiles of ovirtmgmt and of every network created "public"; a
// profile seeded Private has no such grant.
func (inv *inventory) profileNeed(p *vnicProfile) need {
	ids := []string{p.id, systemID}
	if p.net != nil {
		ids = append(ids, p.net.id, p.net.dc.id)
	}
	return need{group: ActionConfigureVMNetwork, object: ids, everyone: !p.private}
}

// authorize is isUserAuthorizedToRunAction: nil when the request's user holds every needed
// action group on its object or a parent, else the Engine's refusal. Called with s.mu held.
func (s *Simulator) authorize(rq *apiReq, needs ...need) *apiError {
	if rq.user == "" {
		return nil // the administrator: SuperUser on the system
	}
	s.authMu.RLock()
	defer s.authMu.RUnlock()
	u := s.users[rq.user]
	for _, n := range needs {
		if !u.holds(n) {
			return &apiError{403, reasonFailed, notAuthorizedWhy}
		}
	}
	return nil
}

func (u *simUser) holds(n need) bool {
	if n.everyone {
		return true
	}
	if u == nil {
		return false
	}
	for _, id := range n.object {
		for _, g := range u.grants {
			if g.object == id && g.groups[n.group] {
				return true
			}
		}
	}
	return false
}

// ownVM is AddVmCommand.addVmPermission: the creator becomes the VM's UserVmManager unless
// it may already manipulate the VM's permissions through a parent. Called with s.mu held.
func (s *Simulator) ownVM(rq *apiReq, v *vm) {
	if rq.user == "" {
		return
	}
	s.authMu.Lock()
	defer s.authMu.Unlock()
	u := s.users[rq.user]
	if u == nil || u.holds(need{group: ActionManipulatePermissions, object: s.inv.vmObject(v)}) {
		return
	}
	groups, _ := RoleGroups("UserVmManager")
	g := grant{groups: map[string]bool{}, object: v.id}
	for _, a := range groups {
		g.groups[a] = true
	}
	u.grants = append(u.grants, g)
}

// addVMNeeds is AddVmCommand.getPermissionCheckSubjects: CREATE_VM on the cluster and the
// template, CREATE_DISK on each storage domain the request sends a template disk to. It returns nil when
// the cluster or template does not resolve: createVM answers that.
func (inv *inventory) addVMNeeds(sp *vmSpec) []need {
	cl, aerr := inv.resolveCluster(sp.clusterID, sp.clusterName)
	if aerr != nil {
		return nil
	}
	t, aerr := inv.resolveTemplate(sp.templateID, sp.templateName, cl)
	if aerr != nil {
		return nil
	}
	// The Engine grants Everyone UserTemplateBasedVm on Blank.
	tn := need{group: ActionCreateVM, object: []string{t.id, systemID}, everyone: t == inv.blank}
	switch { // a template's parent is the data center of its disks' domain
	case t.cluster != nil:
		tn.object = append(tn.object, t.cluster.dc.id)
	case len(t.disks) > 0 && t.disks[0].sd != nil:
		tn.object = append(tn.object, t.disks[0].sd.dc.id)
	}
	needs := []need{{group: ActionCreateVM, object: inv.clusterObject(cl)}, tn}
	// The REST layer fills the disk destination map only from the request's disk attachments
	// (BackendVmsResource.getDisksToClone); the defaults are chosen later, in validate, after
	// the permission check. So CREATE_DISK is checked only on the domains a request names.
	for _, o := range sp.overrides {
		if o.sdID == "" && o.sdName == "" {
			continue
		}
		if sd, aerr := inv.resolveSD(o.sdID, o.sdName); aerr == nil {
			needs = append(needs, need{group: ActionCreateDisk, object: inv.sdObject(sd)})
		}
	}
	return needs
}

// nicNeeds is AddVmInterfaceCommand's and UpdateVmInterfaceCommand's: CONFIGURE_VM_NETWORK on
// the VM, and on the vNIC profile when a new NIC has one or an update changes it.
func (inv *inventory) nicNeeds(v *vm, sp *nicSpec, old *nic) []need {
	needs := []need{{group: ActionConfigureVMNetwork, object: inv.vmObject(v)}}
	if !sp.hasProfile || sp.profileID == "" {
		return needs
	}
	if old != nil && old.profile != nil && old.profile.id == sp.profileID {
		return needs
	}
	if p := inv.profile(sp.profileID); p != nil {
		needs = append(needs, inv.profileNeed(p))
	}
	return needs
}

// tagNeed is TagsCommandBase's: TAG_MANAGEMENT on the system object, whatever the tag.
func tagNeed() need { return need{group: ActionTagManagement, object: []string{systemID}} }

// authorizeGroups is AffinityGroupCRUDCommand's: MANIPULATE_AFFINITY_GROUPS on the group's
// cluster (nil: the cluster does not exist, which the command itself answers).
func (s *Simulator) authorizeGroups(rq *apiReq, c *cluster) *apiError {
	if c == nil {
		return nil
	}
	return s.authorize(rq, need{group: ActionManipulateAffinityGroups, object: s.inv.clusterObject(c)})
}
