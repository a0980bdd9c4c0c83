package webhooks

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/featuregates"
)

func TestOVirtMachineTemplateDefault(t *testing.T) {
	cloning := provider("ovirt-prod", func(p *infrav1.OVirtProvider) {
		p.Spec.DiskClone, p.Spec.StorageDomainName = ptr.To(true), "fast-ssd"
	})
	tests := []struct {
		name      string
		provider  *infrav1.OVirtProvider
		gates     featuregates.Gates
		old       *infrav1.OVirtMachineTemplate
		wantClone *bool
		wantSD    string
	}{
		{"a create leaves diskclone and the storage domain empty although the provider clones", cloning, featuregates.Gates{}, nil, nil, ""},
		{"a create leaves diskclone empty although the gate is on", nil, featuregates.Gates{DiskClone: true}, nil, nil, ""},
		{"an update keeps what the older rules defaulted at create", cloning, featuregates.Gates{}, machineTemplate(func(t *infrav1.OVirtMachineTemplate) {
			t.Spec.Template.Spec.DiskClone, t.Spec.Template.Spec.StorageDomainName = ptr.To(false), "data"
		}), ptr.To(false), "data"},
		{"an update of a template created empty stays empty", cloning, featuregates.Gates{DiskClone: true}, machineTemplate(), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &OVirtMachineTemplateWebhook{Reader: readerWith(), Gates: tt.gates}
			if tt.provider != nil {
				w.Reader = readerWith(tt.provider)
			}
			ctx := context.Background()
			if tt.old != nil {
				ctx = updateContext(t, tt.old)
			}
			obj := machineTemplate()
			g.Expect(w.Default(ctx, obj)).To(Succeed())
			if tt.wantClone == nil {
				g.Expect(obj.Spec.Template.Spec.DiskClone).To(BeNil())
			} else {
				g.Expect(obj.Spec.Template.Spec.DiskClone).To(HaveValue(Equal(*tt.wantClone)))
			}
			g.Expect(obj.Spec.Template.Spec.StorageDomainName).To(Equal(tt.wantSD))
		})
	}
}

// TestMachinesOfADefaultTemplateFollowTheProviderAndTheGate creates machines from one template
// the way Cluster API does (the template's spec.template.spec copied into a new OVirtMachine,
// then admitted) while the provider's diskclone and the gate change: each machine gets the mode
// in force when it is created; the template never changes.
func TestMachinesOfADefaultTemplateFollowTheProviderAndTheGate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tw := &OVirtMachineTemplateWebhook{Reader: readerWith(provider("ovirt-prod"))}
	tpl := machineTemplate()
	g.Expect(tw.Default(ctx, tpl)).To(Succeed())
	_, err := tw.ValidateCreate(ctx, tpl)
	g.Expect(err).NotTo(HaveOccurred())
	stored := tpl.DeepCopy()

	steps := []struct {
		name      string
		provider  *infrav1.OVirtProvider
		gates     featuregates.Gates
		wantClone bool
		wantSD    string
	}{
		{"neither the provider nor the gate clones", provider("ovirt-prod"), featuregates.Gates{}, false, ""},
		{"the provider turns cloning on with a storage domain", provider("ovirt-prod", func(p *infrav1.OVirtProvider) {
			p.Spec.DiskClone, p.Spec.StorageDomainName = ptr.To(true), "fast-ssd"
		}), featuregates.Gates{}, true, "fast-ssd"},
		{"the provider is back to Default and the gate is on", provider("ovirt-prod"), featuregates.Gates{DiskClone: true}, true, ""},
		{"the provider's No wins over the gate", provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(false) }),
			featuregates.Gates{DiskClone: true}, false, ""},
	}
	for _, step := range steps {
		mw := &OVirtMachineWebhook{Reader: readerWith(step.provider), Gates: step.gates}
		m := machine(func(m *infrav1.OVirtMachine) { m.Spec.OVirtVMSpec = *stored.Spec.Template.Spec.DeepCopy() })
		g.Expect(mw.Default(ctx, m)).To(Succeed(), step.name)
		_, err := mw.ValidateCreate(ctx, m)
		g.Expect(err).NotTo(HaveOccurred(), step.name)
		g.Expect(m.Spec.DiskClone).To(HaveValue(Equal(step.wantClone)), step.name)
		g.Expect(m.Spec.StorageDomainName).To(Equal(step.wantSD), step.name)
	}
	g.Expect(stored.Spec.Template.Spec.DiskClone).To(BeNil(), "the template stays Default")
}

func TestOVirtMachineTemplateValidateCreate(t *testing.T) {
	tests := []struct {
		name         string
		provider     *infrav1.OVirtProvider
		obj          *infrav1.OVirtMachineTemplate
		wantErr      []string
		wantWarnings int
	}{
		{"the product doc example is admitted", provider("ovirt-prod"), machineTemplate(), nil, 0},
		{"a storage domain without cloning is admitted with a warning under spec.template.spec (only the Engine knows whether the template's disks are there)", provider("ovirt-prod"),
			machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.StorageDomainName = "fast-ssd" }),
			nil, 1},
		{"an OS disk above 65536 GiB is refused under spec.template.spec", provider("ovirt-prod"),
			machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.OSDiskSizeGB = 100000 }),
			[]string{"spec.template.spec.osdisksizegb: Invalid value: 100000"}, 0},
		{"an empty vNIC profile is refused under spec.template.spec", provider("ovirt-prod"),
			machineTemplate(func(t *infrav1.OVirtMachineTemplate) {
				t.Spec.Template.Spec.NICs = []infrav1.NIC{{VnicProfile: "a"}, {}}
			}),
			[]string{"spec.template.spec.nics[1].vnicprofile: Required value"}, 0},
		{"a missing provider is admitted with a warning", nil, machineTemplate(), nil, 1},
		{"a storage domain that holds only because the provider clones is admitted with a warning",
			provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(true) }),
			machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.StorageDomainName = "fast-ssd" }), nil, 1},
		{"a storage domain with the template's own diskclone true is admitted without a warning",
			provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(false) }),
			machineTemplate(func(t *infrav1.OVirtMachineTemplate) {
				t.Spec.Template.Spec.StorageDomainName, t.Spec.Template.Spec.DiskClone = "fast-ssd", ptr.To(true)
			}), nil, 0},
		{"a storage domain is a warning when the provider's No wins over the template's Default",
			provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(false) }),
			machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.StorageDomainName = "fast-ssd" }),
			nil, 1},
		{"a template in a namespace its provider allows is admitted", provider("ovirt-prod", allowing([]string{"team-a"}, map[string]string{"env": "prod"})),
			machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Namespace = "team-b" }), nil, 0},
		{"a template in a namespace its provider does not allow is refused under spec.template.spec", provider("ovirt-prod", allowing([]string{"team-a"}, nil)),
			machineTemplate(), []string{"spec.template.spec.provider: Forbidden: OVirtProvider ovirt-prod does not allow namespace default"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			objs := []client.Object{namespace("default", nil), namespace("team-b", map[string]string{"env": "prod"})}
			if tt.provider != nil {
				objs = append(objs, tt.provider)
			}
			w := &OVirtMachineTemplateWebhook{Reader: readerWithObjects(objs...)}
			warnings, err := w.ValidateCreate(context.Background(), tt.obj)
			g.Expect(warnings).To(HaveLen(tt.wantWarnings))
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue())
			for _, want := range tt.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
		})
	}
}

func TestOVirtMachineTemplateValidateUpdate(t *testing.T) {
	dryRunAnnotated := func(t *infrav1.OVirtMachineTemplate) {
		t.Annotations = map[string]string{clusterv1.TopologyDryRunAnnotation: ""}
	}
	tests := []struct {
		name    string
		update  func(*infrav1.OVirtMachineTemplate)
		dryRun  bool
		wantErr []string
	}{
		{"a metadata-only update is admitted", func(t *infrav1.OVirtMachineTemplate) { t.Labels = map[string]string{"a": "b"} }, false, nil},
		{"a spec change is refused and says how to roll out", func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.Template = "rhcos-4.15" }, false,
			[]string{"spec.template.spec.template: Forbidden: an OVirtMachineTemplate cannot change, except spec.template.spec.diskclone and spec.template.spec.storagedomainname: create a new OVirtMachineTemplate"}},
		// Product doc §6: Clone disk and the storage domain of a running group (issue 33, item 2).
		{"diskclone may change in place", func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.DiskClone = ptr.To(true) }, false, nil},
		{"storagedomainname may change in place", func(t *infrav1.OVirtMachineTemplate) {
			t.Spec.Template.Spec.DiskClone, t.Spec.Template.Spec.StorageDomainName = ptr.To(true), "fast-ssd"
		}, false, nil},
		{"an in-place change beside another change is refused for the other only", func(t *infrav1.OVirtMachineTemplate) {
			t.Spec.Template.Spec.DiskClone = ptr.To(true)
			t.Spec.Template.Spec.OSDiskSizeGB = 120
		}, false, []string{"spec.template.spec.osdisksizegb: Forbidden"}},
		{"a change of the machine metadata is refused", func(t *infrav1.OVirtMachineTemplate) {
			t.Spec.Template.ObjectMeta.Labels = map[string]string{"node-role": "x"}
		}, false, []string{"spec.template.metadata: Forbidden"}},
		{"a topology dry-run with the annotation may change the spec", func(t *infrav1.OVirtMachineTemplate) {
			dryRunAnnotated(t)
			t.Spec.Template.Spec.Template = "rhcos-4.15"
		}, true, nil},
		{"a topology dry-run still validates the new spec", func(t *infrav1.OVirtMachineTemplate) {
			dryRunAnnotated(t)
			t.Spec.Template.Spec.CPU.Sockets = 0
		}, true, []string{"spec.template.spec.cpu.sockets: Invalid value: 0"}},
		{"a dry-run without the annotation is not exempt", func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.Template = "rhcos-4.15" }, true,
			[]string{"spec.template.spec.template: Forbidden"}},
		{"the annotation without dry-run is not exempt", func(t *infrav1.OVirtMachineTemplate) {
			dryRunAnnotated(t)
			t.Spec.Template.Spec.Template = "rhcos-4.15"
		}, false, []string{"spec.template.spec.template: Forbidden"}},
		{"a topology dry-run to a provider that does not allow the namespace is refused", func(t *infrav1.OVirtMachineTemplate) {
			dryRunAnnotated(t)
			t.Spec.Template.Spec.Provider = "ovirt-restricted"
		}, true, []string{"spec.template.spec.provider: Forbidden: OVirtProvider ovirt-restricted does not allow namespace default"}},
		{"a change to a provider that does not allow the namespace says so besides the immutability", func(t *infrav1.OVirtMachineTemplate) {
			t.Spec.Template.Spec.Provider = "ovirt-restricted"
		}, false, []string{"spec.template.spec.provider: Forbidden: OVirtProvider ovirt-restricted does not allow namespace default", "spec.template.spec.provider: Forbidden: an OVirtMachineTemplate cannot change"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old := machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.DiskClone = ptr.To(false) })
			obj := old.DeepCopy()
			tt.update(obj)
			ctx := admission.NewContextWithRequest(context.Background(), request(t, admissionv1.Update, obj, old, tt.dryRun))
			r := readerWith(provider("ovirt-prod"), provider("ovirt-restricted", allowing([]string{"team-a"}, nil)))
			_, err := (&OVirtMachineTemplateWebhook{Reader: r}).ValidateUpdate(ctx, old, obj)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
		})
	}
	t.Run("an in-place change gets the rules of a create and says what it does", func(t *testing.T) {
		g := NewWithT(t)
		r := readerWith(provider("ovirt-prod"), provider("ovirt-restricted", allowing([]string{"team-a"}, nil)))
		old := machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.DiskClone = ptr.To(false) })
		obj := old.DeepCopy()
		obj.Spec.Template.Spec.DiskClone = ptr.To(true)
		ctx := admission.NewContextWithRequest(context.Background(), request(t, admissionv1.Update, obj, old, false))
		warnings, err := (&OVirtMachineTemplateWebhook{Reader: r}).ValidateUpdate(ctx, old, obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(warnings).To(ContainElement(ContainSubstring("spec.template.spec.diskclone changed in place: machines that exist and their VMs are not changed, nothing is rolled out")))

		// The provider no longer allows the template's namespace: refused, as a create would be.
		restricted := machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.Provider = "ovirt-restricted" })
		changed := restricted.DeepCopy()
		changed.Spec.Template.Spec.DiskClone = ptr.To(true)
		ctx = admission.NewContextWithRequest(context.Background(), request(t, admissionv1.Update, changed, restricted, false))
		_, err = (&OVirtMachineTemplateWebhook{Reader: r}).ValidateUpdate(ctx, restricted, changed)
		g.Expect(err).To(MatchError(ContainSubstring("spec.template.spec.provider: Forbidden: OVirtProvider ovirt-restricted does not allow namespace default")))
	})
}

func TestOVirtMachineTemplateWarnsWhenTheStorageDomainHoldsOnlyThroughTheProviderOrGate(t *testing.T) {
	withSD := machineTemplate(func(t *infrav1.OVirtMachineTemplate) { t.Spec.Template.Spec.StorageDomainName = "fast-ssd" })
	tests := []struct {
		name     string
		provider *infrav1.OVirtProvider
		gates    featuregates.Gates
		want     string
	}{
		{"the provider's diskclone is named", provider("ovirt-prod", func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = ptr.To(true) }), featuregates.Gates{},
			"it works only because OVirtProvider ovirt-prod sets diskclone: true"},
		{"the gate is named", provider("ovirt-prod"), featuregates.Gates{DiskClone: true},
			"it works only because the disk-clone feature gate is on and OVirtProvider ovirt-prod leaves diskclone empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			w := &OVirtMachineTemplateWebhook{Reader: readerWith(tt.provider), Gates: tt.gates}
			warnings, err := w.ValidateCreate(context.Background(), withSD.DeepCopy())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(warnings).To(ConsistOf(And(ContainSubstring("spec.template.spec.storagedomainname fast-ssd requires disk cloning"),
				ContainSubstring(tt.want), ContainSubstring("set spec.template.spec.diskclone: true"))))
		})
	}
}
