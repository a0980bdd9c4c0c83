package ovirtsim_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

func prop(name, value string) *ovirtsdk.CustomProperty {
	return ovirtsdk.NewCustomPropertyBuilder().Name(name).Value(value).MustBuild()
}

// addVMWith creates a VM from rhcos-4.14 in Default with what edit adds to it.
func addVMWith(conn *ovirtsdk.Connection, name string, edit func(*ovirtsdk.VmBuilder)) (*ovirtsdk.Vm, error) {
	b := vmBuilder(name, "rhcos-4.14", "Default")
	if edit != nil {
		edit(b)
	}
	r, err := conn.SystemService().VmsService().Add().Vm(b.MustBuild()).Send()
	if err != nil {
		return nil, err
	}
	return r.MustVm(), nil
}

func propsOf(v *ovirtsdk.Vm) []string {
	var out []string
	if sl, ok := v.CustomProperties(); ok {
		for _, p := range sl.Slice() {
			out = append(out, p.MustName()+"="+p.MustValue())
		}
	}
	return out
}

func TestCustomPropertiesAreStoredAndAnsweredInTheEnginesOrder(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)

	v, err := addVMWith(conn, "props", func(b *ovirtsdk.VmBuilder) {
		b.CustomPropertiesOfAny(prop("viodiskcache", "writeback"), prop("sap_agent", "true"), prop("hugepages", "2048"))
	})
	g.Expect(err).NotTo(HaveOccurred())
	// VmBaseDao answers them from java.util.HashMaps: hugepages, sap_agent, viodiskcache.
	want := []string{"hugepages=2048", "sap_agent=true", "viodiskcache=writeback"}
	g.Expect(propsOf(v)).To(Equal(want))
	g.Expect(propsOf(getVM(t, conn, v.MustId(), ""))).To(Equal(want))
	st, _ := sim.VM(v.MustId())
	g.Expect(st.CustomProperties).To(Equal([]ovirtsim.CustomProperty{
		{Name: "hugepages", Value: "2048"}, {Name: "sap_agent", Value: "true"}, {Name: "viodiskcache", Value: "writeback"}}))
	g.Expect(st.HugePagesKB).To(Equal(int64(2048)))

	// A PUT with <custom_properties> replaces them; a PUT without keeps them.
	vs := conn.SystemService().VmsService().VmService(v.MustId())
	_, err = vs.Update().Vm(ovirtsdk.NewVmBuilder().Comment("c").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(propsOf(getVM(t, conn, v.MustId(), ""))).To(Equal(want))
	_, err = vs.Update().Vm(ovirtsdk.NewVmBuilder().CustomPropertiesOfAny(prop("sndbuf", "0")).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(propsOf(getVM(t, conn, v.MustId(), ""))).To(Equal([]string{"sndbuf=0"}))

	// Every default predefined property of 4.5 is accepted.
	_, err = addVMWith(conn, "all45", func(b *ovirtsdk.VmBuilder) {
		b.CustomPropertiesOfAny(prop("vhost", "ovirtmgmt:true"), prop("scsi_hostdev", "scsi_hd"),
			prop("nvram_template", "/x"), prop("extra_cpu_flags", "+vmx,-svm"))
	})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestCustomPropertiesAreRefusedLikeTheEngine(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t)
	conn := connect(t, sim)

	cases := []struct {
		name   string
		props  []*ovirtsdk.CustomProperty
		detail string
	}{
		{"unknown", []*ovirtsdk.CustomProperty{prop("foo", "1"), prop("sap_agent", "true"), prop("bar", "2")},
			"[Cannot add VM if some of the specified custom properties are not configured by the system. The keys are: foo,bar]"},
		{"badvalue", []*ovirtsdk.CustomProperty{prop("hugepages", "1G")},
			"[Cannot add VM if some of the specified custom properties have illegal values. The keys are: hugepages]"},
		{"both", []*ovirtsdk.CustomProperty{prop("viodiskcache", "fast"), prop("foo", "1")},
			"[Cannot add VM if some of the specified custom properties are not configured by the system. The keys are: foo, " +
				"Cannot add VM if some of the specified custom properties have illegal values. The keys are: viodiskcache]"},
		{"syntax", []*ovirtsdk.CustomProperty{prop("sap-agent", "true")},
			"[Cannot add VM if custom properties are in invalid format. Please check the input.]"},
		{"empty", []*ovirtsdk.CustomProperty{prop("sndbuf", "")},
			"[Cannot add VM if some of the specified custom properties have illegal values. The keys are: sndbuf]"},
	}
	for _, c := range cases {
		_, err := addVMWith(conn, "bad-"+c.name, func(b *ovirtsdk.VmBuilder) { b.CustomPropertiesOfAny(c.props...) })
		g.Expect(err).To(HaveOccurred(), c.name)
		g.Expect(err.Error()).To(ContainSubstring(`HTTP response code is "400"`), c.name)
		g.Expect(err.Error()).To(ContainSubstring(`Fault detail is "`+c.detail+`"`), c.name)
	}
	// A value with ';' makes the 4.5 command fail to build (500); on 4.4 it is a syntax error.
	_, err := addVMWith(conn, "semicolon", func(b *ovirtsdk.VmBuilder) { b.CustomPropertiesOfAny(prop("sndbuf", "1;2")) })
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring(`HTTP response code is "500"`))
	g.Expect(sim.VMs()).To(BeEmpty())

	// PUT says "edit", and leaves the VM as it was.
	id := createVM(t, conn, "edited", false)
	_, err = conn.SystemService().VmsService().VmService(id).Update().
		Vm(ovirtsdk.NewVmBuilder().CustomPropertiesOfAny(prop("foo", "1")).MustBuild()).Send()
	g.Expect(err).To(MatchError(ContainSubstring(
		"[Cannot edit VM if some of the specified custom properties are not configured by the system. The keys are: foo]")))
	st, _ := sim.VM(id)
	g.Expect(st.CustomProperties).To(BeEmpty())
	g.Expect(sim.RequestCount("POST", "/vms")).To(Equal(7))
	g.Expect(sim.Requests()[ovirtsim.RequestKey{Method: "POST", Path: "/vms", Status: 400}]).To(Equal(5))
}

func TestMdevTypeIsAPropertyOn44AndADeviceOn45(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim45 := startSim(t)
	sim44 := startSim(t, func(b *ovirtsim.Builder) { b.WithVersion("4.4.10") })
	for _, sim := range []*ovirtsim.Simulator{sim44, sim45} {
		conn := connect(t, sim)
		v, err := addVMWith(conn, "vgpu", func(b *ovirtsdk.VmBuilder) {
			b.CustomPropertiesOfAny(prop("mdev_type", "nvidia-11"), prop("sap_agent", "false"))
		})
		g.Expect(err).NotTo(HaveOccurred())
		if sim == sim44 {
			g.Expect(propsOf(v)).To(ConsistOf("mdev_type=nvidia-11", "sap_agent=false"))
		} else {
			// AddVmCommand.init takes the deprecated property out (it becomes a vGPU device).
			g.Expect(propsOf(v)).To(Equal([]string{"sap_agent=false"}))
		}
		// A ';' inside a value: a syntax error on 4.4.
		_, err = addVMWith(conn, "semi", func(b *ovirtsdk.VmBuilder) { b.CustomPropertiesOfAny(prop("sndbuf", "1;2")) })
		if sim == sim44 {
			g.Expect(err).To(MatchError(ContainSubstring("[Cannot add VM if custom properties are in invalid format. Please check the input.]")))
		}
	}
	g.Expect(ovirtsim.DefaultPredefinedVMProperties("4.4")).To(ContainSubstring("mdev_type="))
	g.Expect(ovirtsim.DefaultPredefinedVMProperties("4.5.5")).NotTo(ContainSubstring("mdev_type"))
}

func TestUserDefinedVMPropertiesAndTemplateProperties(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	sim := startSim(t, func(b *ovirtsim.Builder) {
		b.WithVMProperties("", "myprop=^[a-z]+$;anything").
			WithTemplate(ovirtsim.Template{Name: "tuned", Cluster: "Default", MemoryMB: 2048,
				CustomProperties: []ovirtsim.CustomProperty{{Name: "myprop", Value: "abc"}, {Name: "sap_agent", Value: "true"}},
				Disks:            []ovirtsim.TemplateDisk{{SizeGB: 10, Bootable: true, StorageDomain: "data"}}})
	})
	conn := connect(t, sim)

	// Predefined ones first, then the user-defined ones.
	v, err := addVMWith(conn, "mine", func(b *ovirtsdk.VmBuilder) {
		b.CustomPropertiesOfAny(prop("myprop", "xyz"), prop("anything", "a b"), prop("hugepages", "1048576"))
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(propsOf(v)).To(Equal([]string{"hugepages=1048576", "myprop=xyz", "anything=a b"}))
	_, err = addVMWith(conn, "notmine", func(b *ovirtsdk.VmBuilder) { b.CustomPropertiesOfAny(prop("myprop", "X1")) })
	g.Expect(err).To(MatchError(ContainSubstring("have illegal values. The keys are: myprop]")))

	// A VM from a template without <custom_properties> keeps the template's; an empty
	// <custom_properties/> clears them.
	r, err := conn.SystemService().VmsService().Add().Vm(vmBuilder("inherits", "tuned", "Default").MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(propsOf(r.MustVm())).To(Equal([]string{"sap_agent=true", "myprop=abc"}))
	r, err = conn.SystemService().VmsService().Add().
		Vm(vmBuilder("cleared", "tuned", "Default").CustomProperties(&ovirtsdk.CustomPropertySlice{}).MustBuild()).Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(propsOf(r.MustVm())).To(BeEmpty())

	// A configuration regex Go cannot compile, or a template whose properties the Engine
	// would refuse, fails the build.
	_, err = ovirtsim.NewBuilder().WithVMProperties("", "x=(?<=a)b").Build()
	g.Expect(err).To(MatchError(ContainSubstring("user_defined_vm_properties")))
	_, err = ovirtsim.NewBuilder().WithCluster(ovirtsim.Cluster{Name: "C"}).
		WithStorageDomain(ovirtsim.StorageDomain{Name: "d", FreeGB: 10}).
		WithTemplate(ovirtsim.Template{Name: "t", CustomProperties: []ovirtsim.CustomProperty{{Name: "nope", Value: "1"}}}).Build()
	g.Expect(err).To(MatchError(ContainSubstring("are not configured by the system")))
	g.Expect(strings.Count(ovirtsim.DefaultPredefinedVMProperties("4.5"), "=^")).To(Equal(8))
}
