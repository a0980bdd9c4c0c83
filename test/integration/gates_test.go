package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
)

// gateManagers are extra manager processes, one per feature-gate set, each acting only on
// objects labelled with its watch filter. They start once, for the tests of this file.
var gateManagers = struct {
	once sync.Once
	err  error
	mgrs []*harness.Process
}{}

// gateSets maps a watch filter to the --feature-gates of its manager. The suite's main manager
// runs with the defaults (keep=true, add=false, clone=false).
var gateSets = map[string]string{
	"keep-add-clone": "disk-keep-template-name=true,disk-add-vm-name=true,disk-clone=true",
	"add-only":       "disk-keep-template-name=false,disk-add-vm-name=true",
	"none":           "disk-keep-template-name=false,disk-add-vm-name=false",
}

func startGateManagers(t *testing.T) {
	t.Helper()
	gateManagers.once.Do(func() {
		for filter, gates := range gateSets {
			p, err := startManager("gates-"+filter, filter, "--feature-gates="+gates)
			if err != nil {
				gateManagers.err = err
				return
			}
			gateManagers.mgrs = append(gateManagers.mgrs, p)
		}
	})
	NewWithT(t).Expect(gateManagers.err).NotTo(HaveOccurred())
}

func stopGateManagers() {
	for _, p := range gateManagers.mgrs {
		_ = p.Stop(20 * time.Second)
	}
}

func TestDiskAliasesFollowTheGates(t *testing.T) {
	startGateManagers(t)
	tests := []struct {
		name    string
		filter  string
		gates   string
		want    func(vm string) string
		renamed bool
	}{
		{"keep=true add=false (defaults) renames nothing", mainFilter, "defaults", func(string) string { return "rhcos-4.14_Disk1" }, false},
		{"keep=true add=true inserts the VM name before the suffix", "keep-add-clone", gateSets["keep-add-clone"], func(vm string) string { return "rhcos-4.14_" + vm + "_Disk1" }, true},
		{"keep=false add=true drops the template part", "add-only", gateSets["add-only"], func(vm string) string { return vm + "_Disk1" }, true},
		{"keep=false add=false renames nothing", "none", gateSets["none"], func(string) string { return "rhcos-4.14_Disk1" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tc := newTestCluster(t, tt.filter)
			_, om := tc.newMachine(t, vmSpec(), ignitionConfig)
			eventuallyCondition(t, om, condition{Type: infrav1.MachineDiskResizedCondition, Status: corev1.ConditionTrue})
			vm, _ := sim.VMByName(om.Name)
			g.Expect(vm.Disks).To(HaveLen(1))
			g.Expect(vm.Disks[0].Alias).To(Equal(tt.want(om.Name)), "gates %s", tt.gates)
			if tt.renamed {
				note := eventuallyEvent(t, om, "DisksUpdated")
				g.Expect(note).To(ContainSubstring(tt.want(om.Name)))
			}
			deleteAndWait(t, om)
		})
	}
}

// TestCloneResolution checks OVirtMachine.spec.diskclone > OVirtProvider.spec.diskclone >
// the disk-clone gate, and that the resolved value is what oVirt receives.
func TestCloneResolution(t *testing.T) {
	startGateManagers(t)
	ctx := context.Background()
	providers := map[string]*bool{"clone-yes": ptr.To(true), "clone-no": ptr.To(false)}
	for name, clone := range providers {
		p := harness.Provider(name+"-provider", sim.URL(), credentialsSecret, sim.CAPEM())
		p.Spec.DiskClone = clone
		NewWithT(t).Expect(k8s.Create(ctx, p)).To(Succeed())
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	}
	tests := []struct {
		name     string
		filter   string // main: gate false; keep-add-clone: gate true
		provider string
		machine  *bool
		want     bool
	}{
		{"the machine's true wins over a provider's false", mainFilter, "clone-no-provider", ptr.To(true), true},
		{"the machine's false wins over a provider's true and the gate", "keep-add-clone", "clone-yes-provider", ptr.To(false), false},
		{"the provider's true applies when the machine leaves it empty", mainFilter, "clone-yes-provider", nil, true},
		{"the provider's false wins over the gate", "keep-add-clone", "clone-no-provider", nil, false},
		{"the gate decides when both are empty (gate true)", "keep-add-clone", mainProvider, nil, true},
		{"the gate decides when both are empty (gate false)", mainFilter, mainProvider, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tc := newTestCluster(t, tt.filter)
			spec := vmSpec()
			spec.Provider = tt.provider
			spec.DiskClone = tt.machine
			_, om := tc.newMachine(t, spec, ignitionConfig)
			vm := eventuallyVM(t, om.Name, nil)
			g.Expect(vm.Clone).To(Equal(tt.want))
			eventuallyOM(t, om, func(g Gomega, om *infrav1.OVirtMachine) {
				g.Expect(om.Status.DiskClone).To(HaveValue(Equal(tt.want)))
			})
			deleteAndWait(t, om)
		})
	}
}

func TestStorageDomainOverrideOnlyWithClone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tc := newTestCluster(t, mainFilter)

	// Cloned: the disks land on the requested domain.
	spec := vmSpec()
	spec.StorageDomainName = "fast"
	spec.DiskClone = ptr.To(true)
	_, om := tc.newMachine(t, spec, ignitionConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue})
	vm, _ := sim.VMByName(om.Name)
	g.Expect(vm.Clone).To(BeTrue())
	g.Expect(vm.Disks[0].StorageDomain).To(Equal("fast"))
	deleteAndWait(t, om)

	// Not cloned: another domain cannot be used; the message names the three ways out.
	spec.DiskClone = ptr.To(false)
	_, om = tc.newMachine(t, spec, ignitionConfig)
	got := eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionFalse,
		Reason: infrav1.StorageDomainRequiresCloneReason, Severity: clusterv1.ConditionSeverityWarning})
	msg := got.Status.Conditions[0].Message
	for _, c := range got.Status.Conditions {
		if c.Type == infrav1.MachineCreatedCondition {
			msg = c.Message
		}
	}
	g.Expect(msg).To(And(ContainSubstring("spec.diskclone: true"), ContainSubstring("OVirtProvider"), ContainSubstring("disk-clone feature gate")))
	_, exists := sim.VMByName(om.Name)
	g.Expect(exists).To(BeFalse())
	deleteAndWait(t, om)

	// The template's own domain needs no clone.
	spec.StorageDomainName = "data"
	_, om = tc.newMachine(t, spec, ignitionConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue})
	vm, _ = sim.VMByName(om.Name)
	g.Expect(vm.Clone).To(BeFalse())
	g.Expect(vm.Disks[0].StorageDomain).To(Equal("data"))
	deleteAndWait(t, om)

	// The provider's storage domain is the default of its machines.
	p := harness.Provider("sd-fast-provider", sim.URL(), credentialsSecret, sim.CAPEM())
	p.Spec.StorageDomainName = "fast"
	p.Spec.DiskClone = ptr.To(true)
	g.Expect(k8s.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	spec = vmSpec()
	spec.Provider = p.Name
	_, om = tc.newMachine(t, spec, ignitionConfig)
	eventuallyCondition(t, om, condition{Type: infrav1.MachineCreatedCondition, Status: corev1.ConditionTrue})
	vm, _ = sim.VMByName(om.Name)
	g.Expect(vm.Disks[0].StorageDomain).To(Equal("fast"))
	deleteAndWait(t, om)
}
