package ovirt_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

// reads are the Client methods that change nothing in oVirt: the only ones a fenced Client
// still sends.
var reads = []string{"Ping", "EngineInfo", "FindCluster", "FindTemplate", "FindStorageDomain", "FindVnicProfile", "GetVM",
	"ListDiskAttachments", "FindVMsByName", "ListVMs", "GetCluster", "ListAffinityGroups", "FindTag", "GetTag",
	"ListHosts", "ListHostDevices", "ListVMHostDevices"}

// TestAFencedClientSendsNoWrite calls every method of ovirt.Client through a fenced Client whose
// fence refuses: each one that is not a read returns ErrFenced and reaches nothing. A write
// method added to the interface later and not fenced fails here.
func TestAFencedClientSendsNoWrite(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	under := fake.NewDefaultClient()
	refused := errors.New("the lease was last renewed 40s ago")
	f := ovirt.FencedFactory(fake.NewFactory(under), func() error { return refused })
	c, err := f.ForProvider(ctx, ovirt.Config{Provider: "p1", URL: "https://engine.example.com/ovirt-engine/api"})
	g.Expect(err).NotTo(HaveOccurred())

	it := reflect.TypeFor[ovirt.Client]()
	cv := reflect.ValueOf(c)
	var writes []string
	for i := range it.NumMethod() {
		m := it.Method(i)
		if slices.Contains(reads, m.Name) {
			continue
		}
		writes = append(writes, m.Name)
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for j := 1; j < m.Type.NumIn(); j++ {
			args = append(args, reflect.Zero(m.Type.In(j)))
		}
		out := cv.MethodByName(m.Name).Call(args)
		errV := out[len(out)-1].Interface()
		g.Expect(errV).NotTo(BeNil(), "%s was not fenced", m.Name)
		err := errV.(error)
		g.Expect(errors.Is(err, ovirt.ErrFenced)).To(BeTrue(), "%s: %v", m.Name, err)
		g.Expect(err.Error()).To(ContainSubstring("renewed 40s ago"), "the error says why")
	}
	g.Expect(writes).To(ContainElements("CreateVM", "RemoveVM", "Power", "UpdateVM", "UpdateDisk", "RemoveAffinityGroup",
		"CreateTag", "UpdateTagDescription", "AddDisk", "AssignTag", "AttachHostDevice", "DetachHostDevice", "PinVM"))
	for _, w := range writes {
		g.Expect(under.CallCount(w)).To(BeZero(), "%s reached oVirt", w)
	}

	// Reads go through, and a fence that allows lets writes through.
	_, err = c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.FindTag(ctx, "root")
	g.Expect(err).NotTo(HaveOccurred(), "a read of a tag is not fenced")
	open := ovirt.FencedFactory(fake.NewFactory(under), func() error { return nil })
	c, err = open.ForProvider(ctx, ovirt.Config{Provider: "p1", URL: "https://engine.example.com/ovirt-engine/api"})
	g.Expect(err).NotTo(HaveOccurred())
	vm := under.PutVM(ovirt.VM{Name: "w-1", Status: ovirt.VMStatusDown})
	g.Expect(c.RemoveVM(ctx, vm.ID)).To(Succeed())
	g.Expect(under.CallCount("RemoveVM")).To(Equal(1))
	tag, err := c.CreateTag(ctx, "capov-hb-0123456789abcdef", "seq=1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.UpdateTagDescription(ctx, tag.ID, "seq=2")).To(Succeed())
	g.Expect(under.CallCount("CreateTag")).To(Equal(1))
	g.Expect(under.CallCount("UpdateTagDescription")).To(Equal(1))
	sd, err := c.FindStorageDomain(ctx, "data")
	g.Expect(err).NotTo(HaveOccurred())
	w2 := under.PutVM(ovirt.VM{Name: "w-2", Status: ovirt.VMStatusDown})
	_, err = c.AddDisk(ctx, w2.ID, ovirt.DiskSpec{Alias: "w-2_data", SizeBytes: 1 << 30, StorageDomainID: sd.ID, Sparse: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.AssignTag(ctx, w2.ID, tag.ID)).To(Succeed())
	g.Expect(under.CallCount("AddDisk")).To(Equal(1))
	g.Expect(under.CallCount("AssignTag")).To(Equal(1))
}
