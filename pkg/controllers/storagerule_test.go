package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/webhooks"
)

// TestTheStorageDomainRuleIsOneRuleForAdmissionAndTheManager runs every case of the clone and
// storage-domain rule (product doc §6) through both paths: the OVirtMachine webhook (defaulting
// and validation, without the Engine) and then the manager (with the Engine's facts), on what
// admission let through. Admission refuses nothing the manager would accept: before, a
// storagedomainname equal to the template's own domain with cloning off was refused at
// admission, though the manager creates that VM (issue 33, item 4). The fake Engine's template
// has its disk on "data"; "fast" holds no copy.
func TestTheStorageDomainRuleIsOneRuleForAdmissionAndTheManager(t *testing.T) {
	tests := []struct {
		name                  string
		machineClone          *bool
		providerClone         *bool
		gate                  bool
		storageDomain         string
		wantWarning           bool
		wantCreated           bool
		wantStorageDomainUsed bool
	}{
		{"no storage domain, nothing set", nil, nil, false, "", false, true, false},
		{"another domain, the group clones", ptr.To(true), nil, false, "fast", false, true, true},
		{"another domain, the provider clones", nil, ptr.To(true), false, "fast", false, true, true},
		{"another domain, the gate clones", nil, nil, true, "fast", false, true, true},
		{"another domain without cloning: admitted with a warning, the manager reports StorageDomainRequiresClone", nil, nil, false, "fast", true, false, false},
		{"the group's No wins over a cloning provider", ptr.To(false), ptr.To(true), true, "fast", true, false, false},
		{"the template's own domain without cloning: admitted, and the manager creates the VM", nil, nil, false, "data", true, true, false},
		{"the template's own domain, the group says No", ptr.To(false), nil, true, "data", true, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			f := newMachineFixture(t)
			f.ov.AddStorageDomain(ovirt.StorageDomain{Name: "fast", Available: 1000 << 30, Status: "active", Usable: true})
			gates := featuregates.Gates{DiskClone: tt.gate}
			f.r.Gates = gates
			p := &infrav1.OVirtProvider{}
			g.Expect(f.c.Get(ctx, client.ObjectKey{Name: "p1"}, p)).To(Succeed())
			p.Spec.DiskClone = tt.providerClone
			g.Expect(f.c.Update(ctx, p)).To(Succeed())

			// Admission, as the API server runs it on create.
			om := f.get(t)
			om.Spec.DiskClone, om.Spec.StorageDomainName = tt.machineClone, tt.storageDomain
			w := &webhooks.OVirtMachineWebhook{Reader: f.c, Gates: gates}
			g.Expect(w.Default(ctx, om)).To(Succeed())
			warnings, err := w.ValidateCreate(ctx, om)
			g.Expect(err).NotTo(HaveOccurred(), "admission refuses nothing on this rule: it cannot see the template's disks")
			if tt.wantWarning {
				g.Expect(warnings).To(ContainElement(ContainSubstring("spec.storagedomainname " + tt.storageDomain + ": diskclone resolves to false")))
			} else {
				g.Expect(warnings).To(BeEmpty())
			}

			// The manager, on what admission admitted.
			g.Expect(f.c.Update(ctx, om)).To(Succeed())
			_, err = f.reconcile(t)
			g.Expect(err).NotTo(HaveOccurred())
			got := f.get(t)
			if !tt.wantCreated {
				g.Expect(f.ov.CallCount("CreateVM")).To(BeZero())
				g.Expect(v1beta1conditions.GetReason(got, infrav1.MachineCreatedCondition)).To(Equal(infrav1.StorageDomainRequiresCloneReason))
				return
			}
			g.Expect(f.ov.CallCount("CreateVM")).To(Equal(1), "condition %s: %s", v1beta1conditions.GetReason(got, infrav1.MachineCreatedCondition),
				v1beta1conditions.GetMessage(got, infrav1.MachineCreatedCondition))
			vm, err := f.ov.GetVM(ctx, got.Status.VMID)
			g.Expect(err).NotTo(HaveOccurred())
			want := "data" // the template's: disks that are not cloned stay there
			if tt.wantStorageDomainUsed {
				want = tt.storageDomain
			}
			sd, err := f.ov.FindStorageDomain(ctx, want)
			g.Expect(err).NotTo(HaveOccurred())
			for _, d := range vm.Disks {
				g.Expect(d.StorageDomainID).To(Equal(sd.ID), "disk %s", d.Alias)
			}
		})
	}
}
