package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/test/ovirtsim"
)

// Hosts, host devices, pinning, reboot and reset against an engineFront that answers in the
// Engine's exact format (HostMapper, HostDeviceMapper, VmBaseMapper of ovirt-engine 4.5, element
// names as go-ovirt's readers take them) and with its refusal texts (AppErrors.properties).

const (
	gpuName  = "pci_0000_3b_00_0"
	gpuHexID = "7063695f303030305f33625f30305f30" // HexUtils.string2hex(gpuName)
)

// hostDevicesXML is GET /hosts/h-1/devices as the Engine renders it: ids as stored (0x10de),
// a parent device inline with its name or as a reference, iommu_group absent for a device
// without one, <vm> for the device a running VM holds.
const hostDevicesXML = `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<host_devices>
  <host_device href="/ovirt-engine/api/hosts/h-1/devices/` + gpuHexID + `" id="` + gpuHexID + `">
    <name>pci_0000_3b_00_0</name>
    <capability>pci</capability>
    <driver>vfio-pci</driver>
    <iommu_group>40</iommu_group>
    <m_dev_types>
      <m_dev_type>
        <available_instances>4</available_instances>
        <description>num_heads=1, frl_config=60</description>
        <human_readable_name>GRID A100-10C</human_readable_name>
        <name>nvidia-22</name>
      </m_dev_type>
      <m_dev_type><available_instances>0</available_instances><name>nvidia-23</name></m_dev_type>
    </m_dev_types>
    <product id="0x20B5"><name>GA100 [A100 PCIe 80GB]</name></product>
    <vendor id="0x10de"><name>NVIDIA Corporation</name></vendor>
    <virtual_functions>0</virtual_functions>
    <host href="/ovirt-engine/api/hosts/h-1" id="h-1"/>
    <parent_device href="/ovirt-engine/api/hosts/h-1/devices/7063695f303030305f33615f30305f30" id="7063695f303030305f33615f30305f30">
      <name>pci_0000_3a_00_0</name>
      <host href="/ovirt-engine/api/hosts/h-1" id="h-1"/>
    </parent_device>
    <vm href="/ovirt-engine/api/vms/vm-9" id="vm-9"/>
  </host_device>
  <host_device href="/ovirt-engine/api/hosts/h-1/devices/7573625f315f31" id="7573625f315f31">
    <name>usb_1_1</name>
    <capability>usb</capability>
    <host href="/ovirt-engine/api/hosts/h-1" id="h-1"/>
    <parent_device href="/ovirt-engine/api/hosts/h-1/devices/636f6d7075746572" id="636f6d7075746572"/>
  </host_device>
</host_devices>`

func TestListHostsInTheEnginesFormat(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	e, c := front.client(t)
	cl, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	front.set(func(w http.ResponseWriter, r *http.Request, path, body string) bool {
		if r.Method != "GET" || path != "/hosts" {
			return false
		}
		writeXML(w, 200, fmt.Sprintf(`<hosts>
  <host href="/ovirt-engine/api/hosts/h-1" id="h-1">
    <name>h1</name><address>h1.example.com</address>
    <device_passthrough><enabled>true</enabled></device_passthrough>
    <max_scheduling_memory>270582939648</max_scheduling_memory><memory>274877906944</memory>
    <status>up</status>
    <cluster href="/ovirt-engine/api/clusters/%[1]s" id="%[1]s"/>
  </host>
  <host href="/ovirt-engine/api/hosts/h-2" id="h-2">
    <name>h2</name><device_passthrough><enabled>false</enabled></device_passthrough>
    <max_scheduling_memory>0</max_scheduling_memory><status>maintenance</status>
    <cluster href="/ovirt-engine/api/clusters/%[1]s" id="%[1]s"/>
  </host>
  <host href="/ovirt-engine/api/hosts/h-3" id="h-3">
    <name>h3</name><status>up</status><cluster href="/ovirt-engine/api/clusters/cl-other" id="cl-other"/>
  </host>
</hosts>`, cl.ID))
		return true
	})

	hosts, err := c.ListHosts(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hosts).To(Equal([]ovirt.Host{
		{ID: "h-1", Name: "h1", ClusterID: cl.ID, Status: "up", PassthroughEnabled: true, MaxSchedulingMemoryBytes: 270582939648},
		{ID: "h-2", Name: "h2", ClusterID: cl.ID, Status: "maintenance"},
	}), "every status; a host of another cluster (a wildcard's match) left out")
	g.Expect(front.requests()).To(ContainElement(`GET /hosts?case_sensitive=true&search=cluster%3D%22Default%22`))
	g.Expect(counterValue(e, "requests_total", "ListHosts", "2xx")).To(Equal(1.0))

	_, err = c.ListHosts(ctx, "Nowhere")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "no such cluster")
	_, err = c.ListHosts(ctx, "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(front.count("GET", "/hosts")).To(Equal(1), "neither reached the hosts")
}

func TestListHostDevicesInTheEnginesFormat(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	front.set(func(w http.ResponseWriter, r *http.Request, path, body string) bool {
		switch {
		case r.Method == "GET" && path == "/hosts/h-1/devices":
			writeXML(w, 200, hostDevicesXML)
		case r.Method == "GET" && (path == "/hosts/h-empty/devices" || path == "/hosts/h-gone/devices"):
			// The Engine does not look the host up: an unknown one has no devices either.
			writeXML(w, 200, `<host_devices/>`)
		case r.Method == "GET" && path == "/hosts/h-empty":
			writeXML(w, 200, `<host href="/ovirt-engine/api/hosts/h-empty" id="h-empty"><name>h-empty</name></host>`)
		case r.Method == "GET" && path == "/hosts/h-gone":
			writeEmpty(w, 404)
		default:
			return false
		}
		return true
	})
	e, c := front.client(t)

	devs, err := c.ListHostDevices(ctx, "h-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(devs).To(Equal([]ovirt.HostDevice{
		{ID: gpuHexID, Name: gpuName, HostID: "h-1", Capability: "pci", VendorID: "10de", ProductID: "20b5",
			VendorName: "NVIDIA Corporation", ProductName: "GA100 [A100 PCIe 80GB]", IOMMUGroup: 40,
			ParentName: "pci_0000_3a_00_0", Driver: "vfio-pci", VMID: "vm-9",
			MDevTypes: []ovirt.MDevType{{Name: "nvidia-22", AvailableInstances: 4}, {Name: "nvidia-23"}}},
		{ID: "7573625f315f31", Name: "usb_1_1", HostID: "h-1", Capability: "usb", IOMMUGroup: -1, ParentName: "computer"},
	}))
	g.Expect(front.count("GET", "/hosts/h-1")).To(BeZero(), "devices came back: no confirmation")
	g.Expect(counterValue(e, "requests_total", "ListHostDevices", "2xx")).To(Equal(1.0))

	devs, err = c.ListHostDevices(ctx, "h-empty")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(devs).To(BeEmpty())
	_, err = c.ListHostDevices(ctx, "h-gone")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "an empty answer is confirmed with GET /hosts/{id}")
	g.Expect(front.count("GET", "/hosts/h-gone")).To(Equal(1))
	_, err = c.ListHostDevices(ctx, "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
}

func TestListVMHostDevicesWithPlaceholders(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	front := newEngineFront(t, sim)
	front.set(func(w http.ResponseWriter, r *http.Request, path, body string) bool {
		if r.Method != "GET" || !strings.HasSuffix(path, "/hostdevices") {
			return false
		}
		if path != "/vms/vm-1/hostdevices" {
			writeXML(w, 200, `<host_devices/>`)
			return true
		}
		// BackendVmHostDevicesResource: every device's <vm> is this VM; a device added for the
		// IOMMU group of a requested one is a placeholder.
		writeXML(w, 200, `<host_devices>
  <host_device href="/ovirt-engine/api/vms/vm-1/hostdevices/`+gpuHexID+`" id="`+gpuHexID+`">
    <name>pci_0000_3b_00_0</name><capability>pci</capability><iommu_group>40</iommu_group>
    <product id="0x20b5"/><vendor id="0x10de"/>
    <host href="/ovirt-engine/api/hosts/h-1" id="h-1"/><vm href="/ovirt-engine/api/vms/vm-1" id="vm-1"/>
  </host_device>
  <host_device href="/ovirt-engine/api/vms/vm-1/hostdevices/7063695f303030305f33625f30305f31" id="7063695f303030305f33625f30305f31">
    <name>pci_0000_3b_00_1</name><capability>pci</capability><iommu_group>40</iommu_group><placeholder>true</placeholder>
    <host href="/ovirt-engine/api/hosts/h-1" id="h-1"/><vm href="/ovirt-engine/api/vms/vm-1" id="vm-1"/>
  </host_device>
</host_devices>`)
		return true
	})
	_, c := front.client(t)

	devs, err := c.ListVMHostDevices(ctx, "vm-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(devs).To(Equal([]ovirt.HostDevice{
		{ID: gpuHexID, Name: gpuName, HostID: "h-1", Capability: "pci", VendorID: "10de", ProductID: "20b5", IOMMUGroup: 40, VMID: "vm-1"},
		{ID: "7063695f303030305f33625f30305f31", Name: "pci_0000_3b_00_1", HostID: "h-1", Capability: "pci", IOMMUGroup: 40,
			VMID: "vm-1", Placeholder: true},
	}))

	// No devices: the VM is read to tell a VM without devices from one that does not exist.
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "plain", ClusterID: cluster.ID, TemplateID: tpl.ID})
	g.Expect(err).NotTo(HaveOccurred())
	devs, err = c.ListVMHostDevices(ctx, vm.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(devs).To(BeEmpty())
	_, err = c.ListVMHostDevices(ctx, "00000000-0000-4000-8000-00000000dead")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	_, err = c.ListVMHostDevices(ctx, "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
}

func TestAttachHostDeviceOnTheWireAndTheEnginesRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	const path = "/vms/vm-1/hostdevices"
	var status atomic.Int32
	var detail atomic.Value
	front.set(func(w http.ResponseWriter, r *http.Request, p, body string) bool {
		if r.Method != "POST" || p != path {
			return false
		}
		switch s := int(status.Load()); s {
		case 201:
			writeXML(w, 201, `<host_device href="/ovirt-engine/api/vms/vm-1/hostdevices/`+gpuHexID+`" id="`+gpuHexID+`">
  <name>pci_0000_3b_00_0</name><capability>pci</capability><iommu_group>40</iommu_group>
  <host href="/ovirt-engine/api/hosts/h-1" id="h-1"/><vm href="/ovirt-engine/api/vms/vm-1" id="vm-1"/>
</host_device>`)
		case 404:
			writeEmpty(w, 404)
		default:
			writeFault(w, s, detail.Load().(string))
		}
		return true
	})
	e, c := front.client(t)

	status.Store(201)
	g.Expect(c.AttachHostDevice(ctx, "vm-1", gpuName)).To(Succeed())
	g.Expect(front.body("POST", path)).To(Equal(`<host_device><name>pci_0000_3b_00_0</name></host_device>`), "by name")
	g.Expect(counterValue(e, "requests_total", "AttachHostDevice", "2xx")).To(Equal(1.0))

	tests := []struct {
		name     string
		status   int
		detail   string
		kinds    []error
		notKinds []error
	}{
		{"a VM that is not down", 409, "[Cannot add Host devices because the VM is in Up status.]",
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrConflict, ovirt.ErrLocked}},
		{"a VM not pinned", 409, "[Cannot add Host devices. VM must be pinned to a host.]",
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrConflict}},
		{"a VM pinned to several hosts", 409, "[Cannot add Host devices. VM must be pinned to a single host.]",
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrConflict}},
		{"a device not on the pinned host", 400, "[Cannot add Host devices. One or more of specified host devices not found.]",
			[]error{ovirt.ErrInvalid}, []error{ovirt.ErrNotFound}},
		{"a VM the command did not find", 400, "[Cannot add Host devices. VM is not found.]",
			[]error{ovirt.ErrNotFound}, []error{ovirt.ErrInvalid}},
		{"a VM being created", 409, "[Cannot add Host devices because the VM is in Image Locked status.]",
			[]error{ovirt.ErrLocked, ovirt.ErrConflict}, []error{ovirt.ErrInvalid}},
		{"a VM gone", 404, "", []error{ovirt.ErrNotFound}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			status.Store(int32(tt.status))
			detail.Store(tt.detail)
			err := c.AttachHostDevice(ctx, "vm-1", gpuName)
			for _, k := range tt.kinds {
				g.Expect(err).To(MatchError(k))
			}
			for _, k := range tt.notKinds {
				g.Expect(err).NotTo(MatchError(k))
			}
			var oe *ovirt.Error
			g.Expect(errors.As(err, &oe)).To(BeTrue())
			g.Expect(oe.Op).To(Equal("AttachHostDevice"))
			g.Expect(oe.Status).To(Equal(tt.status))
			if tt.detail != "" {
				g.Expect(oe.Detail).To(Equal("Operation Failed: "+tt.detail), "the Engine's message")
			}
		})
	}

	front.reset()
	g.Expect(c.AttachHostDevice(ctx, "vm-1", "")).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.AttachHostDevice(ctx, "", gpuName)).To(MatchError(ovirt.ErrInvalid))
	g.Expect(front.requests()).To(BeEmpty(), "refused before any call")

	// A write: fenced like the others.
	fenced, err := ovirt.FencedFactory(e.f, func() error { return errors.New("lease lost") }).ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fenced.AttachHostDevice(ctx, "vm-1", gpuName)).To(MatchError(ovirt.ErrFenced))
	g.Expect(fenced.DetachHostDevice(ctx, "vm-1", gpuName)).To(MatchError(ovirt.ErrFenced))
	g.Expect(fenced.PinVM(ctx, "vm-1", "h-1")).To(MatchError(ovirt.ErrFenced))
	g.Expect(fenced.Power(ctx, "vm-1", ovirt.PowerReset)).To(MatchError(ovirt.ErrFenced))
	g.Expect(front.requests()).To(BeEmpty(), "no fenced write reached the Engine")
}

func TestDetachHostDeviceByItsHexID(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	const path = "/vms/vm-1/hostdevices/" + gpuHexID
	var answer atomic.Int32
	front.set(func(w http.ResponseWriter, r *http.Request, p, body string) bool {
		if r.Method != "DELETE" || !strings.HasPrefix(p, "/vms/vm-1/hostdevices/") {
			return false
		}
		switch answer.Load() {
		case 200:
			writeXML(w, 200, `<action><status>complete</status></action>`)
		case 404:
			// BackendVmHostDeviceResource.remove reads the VM's devices first.
			writeEmpty(w, 404)
		case 409:
			writeFault(w, 409, "[Cannot remove Host devices because the VM is in Up status.]")
		}
		return true
	})
	e, c := front.client(t)

	answer.Store(200)
	g.Expect(c.DetachHostDevice(ctx, "vm-1", gpuName)).To(Succeed())
	g.Expect(front.count("DELETE", path)).To(Equal(1), "the id is the hex of the name: one call")
	g.Expect(counterValue(e, "requests_total", "DetachHostDevice", "2xx")).To(Equal(1.0))
	answer.Store(404)
	g.Expect(c.DetachHostDevice(ctx, "vm-1", gpuName)).To(Succeed(), "not attached is no error")
	answer.Store(409)
	err := c.DetachHostDevice(ctx, "vm-1", gpuName)
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(err).NotTo(MatchError(ovirt.ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("Cannot remove Host devices because the VM is in Up status."))
	g.Expect(c.DetachHostDevice(ctx, "vm-1", "")).To(MatchError(ovirt.ErrInvalid))
}

func TestPinVMAndPinnedCreateSendThePlacementPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	front := newEngineFront(t, sim)
	var refuse atomic.Bool
	front.set(func(w http.ResponseWriter, r *http.Request, p, body string) bool {
		switch {
		case r.Method == "PUT" && p == "/vms/vm-1" && refuse.Load():
			writeFault(w, 409, "[Cannot edit VM. VM is pinned to a specific host. The required host doesn't exist.]")
		case r.Method == "PUT" && p == "/vms/vm-1":
			writeXML(w, 200, `<vm href="/ovirt-engine/api/vms/vm-1" id="vm-1"><name>w</name><status>down</status>
  <placement_policy><affinity>pinned</affinity><hosts><host href="/ovirt-engine/api/hosts/h-1" id="h-1"/></hosts></placement_policy></vm>`)
		case r.Method == "GET" && p == "/vms/vm-1":
			writeXML(w, 200, `<vm href="/ovirt-engine/api/vms/vm-1" id="vm-1"><name>w</name><status>down</status>
  <placement_policy><affinity>pinned</affinity><hosts><host href="/ovirt-engine/api/hosts/h-1" id="h-1"/></hosts></placement_policy>
  <disk_attachments><disk_attachment id="d-1"><bootable>true</bootable><interface>virtio_scsi</interface>
    <disk id="d-1"><alias>w_Disk1</alias><provisioned_size>17179869184</provisioned_size><status>ok</status></disk>
  </disk_attachment></disk_attachments><nics/><tags/>
</vm>`)
		case r.Method == "POST" && p == "/vms" && strings.Contains(body, "<placement_policy>"):
			writeFault(w, 409, "[Cannot add VM. VM is pinned to a specific host. The host's cluster must be the same as the selected VM cluster.]")
		default:
			return false
		}
		return true
	})
	e, c := front.client(t)

	g.Expect(c.PinVM(ctx, "vm-1", "h-1")).To(Succeed())
	g.Expect(front.body("PUT", "/vms/vm-1")).To(Equal(
		`<vm><placement_policy><affinity>pinned</affinity><hosts><host id="h-1"></host></hosts></placement_policy></vm>`),
		"the placement policy only: the rest of the VM stays")
	g.Expect(counterValue(e, "requests_total", "PinVM", "2xx")).To(Equal(1.0))
	refuse.Store(true)
	err := c.PinVM(ctx, "vm-1", "h-gone")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(err).NotTo(MatchError(ovirt.ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("The required host doesn't exist."))
	g.Expect(c.PinVM(ctx, "vm-1", "")).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.PinVM(ctx, "", "h-1")).To(MatchError(ovirt.ErrInvalid))

	vm, err := c.GetVM(ctx, "vm-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.PinnedHostIDs).To(Equal([]string{"h-1"}))
	g.Expect(vm.PlacementAffinity).To(Equal("pinned"))

	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "pinned", ClusterID: cluster.ID, TemplateID: tpl.ID, PinnedHostID: "h-9"})
	g.Expect(err).To(MatchError(ovirt.ErrInvalid), "the Engine's refusal of the host")
	g.Expect(front.body("POST", "/vms")).To(ContainSubstring(
		`<placement_policy><affinity>pinned</affinity><hosts><host id="h-9"></host></hosts></placement_policy>`))
	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "unpinned", ClusterID: cluster.ID, TemplateID: tpl.ID})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(front.body("POST", "/vms")).NotTo(ContainSubstring("placement_policy"), "the template's placement kept")
}

func TestRebootAndResetArePowerActions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	front := newEngineFront(t, newSim(t))
	var fault atomic.Value
	fault.Store("")
	front.set(func(w http.ResponseWriter, r *http.Request, p, body string) bool {
		if r.Method != "POST" || (p != "/vms/vm-1/reboot" && p != "/vms/vm-1/reset") {
			return false
		}
		switch f := fault.Load().(string); {
		case strings.HasPrefix(f, "400 "):
			writeFault(w, 400, strings.TrimPrefix(f, "400 "))
		case strings.HasPrefix(f, "409 "):
			writeFault(w, 409, strings.TrimPrefix(f, "409 "))
		default:
			writeXML(w, 200, `<action><status>complete</status></action>`)
		}
		return true
	})
	e, c := front.client(t)

	g.Expect(c.Power(ctx, "vm-1", ovirt.PowerReboot)).To(Succeed())
	g.Expect(c.Power(ctx, "vm-1", ovirt.PowerReset)).To(Succeed())
	g.Expect(front.count("POST", "/vms/vm-1/reboot")).To(Equal(1))
	g.Expect(front.count("POST", "/vms/vm-1/reset")).To(Equal(1))
	g.Expect(front.body("POST", "/vms/vm-1/reset")).To(Equal(`<action></action>`))
	g.Expect(counterValue(e, "requests_total", "RebootVM", "2xx")).To(Equal(1.0))
	g.Expect(counterValue(e, "requests_total", "ResetVM", "2xx")).To(Equal(1.0))

	// Cluster level below 4.6: ACTION_TYPE_FAILED_RESET_VM_IS_NOT_SUPPORTED is NOT_SUPPORTED, a 400.
	fault.Store("400 [Cannot reset VM. Reset VM requires cluster compatibility version 4.6 or higher.]")
	err := c.Power(ctx, "vm-1", ovirt.PowerReset)
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	var oe *ovirt.Error
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Op).To(Equal("ResetVM"))
	g.Expect(oe.Status).To(Equal(400))
	g.Expect(oe.Detail).To(Equal("Operation Failed: [Cannot reset VM. Reset VM requires cluster compatibility version 4.6 or higher.]"))
	g.Expect(counterValue(e, "requests_total", "ResetVM", "400")).To(Equal(1.0))

	// A VM that does not run: the Engine's 409, a conflict as for the other actions.
	fault.Store("409 [Cannot restart VM because the VM is in Down status.]")
	err = c.Power(ctx, "vm-1", ovirt.PowerReboot)
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	g.Expect(err).NotTo(MatchError(ovirt.ErrLocked))
	g.Expect(err).NotTo(MatchError(ovirt.ErrInvalid))
	g.Expect(c.Power(ctx, "", ovirt.PowerReset)).To(MatchError(ovirt.ErrInvalid))
}

// TestHostDevicesAgainstTheSimulator runs a passthrough machine's Engine calls against
// test/ovirtsim: list the hosts and their devices, create pinned, attach (the whole IOMMU group),
// a second VM configured with the same device, the first start holding the devices and the
// second refused by the HostDevice filter, and a reset refused on a cluster below 4.6.
func TestHostDevicesAgainstTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	group := func(n int) *int { return &n }
	sim := newSim(t, func(b *ovirtsim.Builder) {
		b.WithCluster(ovirtsim.Cluster{Name: "GPU", Hosts: []ovirtsim.Host{
			{Name: "gpu-host-1", DevicePassthrough: true, Devices: []ovirtsim.HostDeviceSeed{
				{Name: gpuName, VendorID: "10de", ProductID: "20b5", VendorName: "NVIDIA Corporation", IOMMUGroup: group(40), Driver: "vfio-pci"},
				{Name: "pci_0000_3b_00_1", VendorID: "10de", ProductID: "1aef", IOMMUGroup: group(40), Driver: "vfio-pci"},
				{Name: "pci_0000_af_00_0", VendorID: "8086", ProductID: "1572"},
			}},
			{Name: "gpu-host-2", Status: "maintenance"},
		}})
		b.WithCluster(ovirtsim.Cluster{Name: "Old", Version: "4.5"})
	})
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())

	hosts, err := c.ListHosts(ctx, "GPU")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hosts).To(HaveLen(2))
	h1 := hosts[0]
	g.Expect(h1.Name).To(Equal("gpu-host-1"))
	g.Expect(h1.Status).To(Equal("up"))
	g.Expect(h1.PassthroughEnabled).To(BeTrue())
	g.Expect(hosts[1].Status).To(Equal("maintenance"), "every status")
	g.Expect(hosts[1].PassthroughEnabled).To(BeFalse())

	devs, err := c.ListHostDevices(ctx, h1.ID)
	g.Expect(err).NotTo(HaveOccurred())
	byName := map[string]ovirt.HostDevice{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	g.Expect(byName).To(HaveKey(gpuName))
	gpu := byName[gpuName]
	g.Expect(gpu.ID).To(Equal(gpuHexID))
	g.Expect(gpu.HostID).To(Equal(h1.ID))
	g.Expect(gpu.VendorID).To(Equal("10de"), "0x10de as the Engine stores it, normalized")
	g.Expect(gpu.ProductID).To(Equal("20b5"))
	g.Expect(gpu.IOMMUGroup).To(Equal(40))
	g.Expect(gpu.VMID).To(BeEmpty())
	g.Expect(byName["pci_0000_af_00_0"].IOMMUGroup).To(Equal(-1), "no iommu_group")

	cluster, err := c.FindCluster(ctx, "GPU")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "")
	g.Expect(err).NotTo(HaveOccurred())
	var vms []*ovirt.VM
	for _, name := range []string{"gpu-0", "gpu-1"} {
		vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: name, ClusterID: cluster.ID, TemplateID: tpl.ID, PinnedHostID: h1.ID})
		g.Expect(err).NotTo(HaveOccurred())
		vms = append(vms, vm)
	}
	g.Eventually(func(g Gomega) {
		for _, vm := range vms {
			got, err := c.GetVM(ctx, vm.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Status).To(Equal(ovirt.VMStatusDown))
			g.Expect(got.PinnedHostIDs).To(Equal([]string{h1.ID}))
			g.Expect(got.PlacementAffinity).To(Equal("pinned"))
		}
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())

	err = c.AttachHostDevice(ctx, vms[0].ID, "pci_0000_99_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(err.Error()).To(ContainSubstring("One or more of specified host devices not found."))
	for _, vm := range vms {
		g.Expect(c.AttachHostDevice(ctx, vm.ID, gpuName)).To(Succeed(), "a device configured on another stopped VM is accepted")
	}
	vmDevs, err := c.ListVMHostDevices(ctx, vms[0].ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmDevs).To(HaveLen(2), "the whole IOMMU group")
	for _, d := range vmDevs {
		g.Expect(d.VMID).To(Equal(vms[0].ID))
		g.Expect(d.Placeholder).To(Equal(d.Name != gpuName), "%s", d.Name)
	}

	g.Expect(c.Power(ctx, vms[0].ID, ovirt.PowerStart)).To(Succeed())
	g.Eventually(func(g Gomega) {
		devs, err := c.ListHostDevices(ctx, h1.ID)
		g.Expect(err).NotTo(HaveOccurred())
		for _, d := range devs {
			if d.Name == gpuName {
				g.Expect(d.VMID).To(Equal(vms[0].ID), "held while it runs")
			}
		}
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	err = c.AttachHostDevice(ctx, vms[0].ID, "pci_0000_af_00_0")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid), "not down")
	err = c.Power(ctx, vms[1].ID, ovirt.PowerStart)
	g.Expect(err).To(MatchError(ovirt.ErrNoHost), "%v", err)
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	g.Expect(err.Error()).To(ContainSubstring("filter HostDevice"))

	// Detaching both wanted devices drops the group; detaching again is no error.
	g.Expect(c.DetachHostDevice(ctx, vms[1].ID, gpuName)).To(Succeed())
	g.Expect(c.DetachHostDevice(ctx, vms[1].ID, gpuName)).To(Succeed())
	vmDevs, err = c.ListVMHostDevices(ctx, vms[1].ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vmDevs).To(BeEmpty(), "only a placeholder was left")

	// Reset needs cluster level 4.6; the level is checked first.
	old, err := c.FindCluster(ctx, "Old")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := c.CreateVM(ctx, ovirt.VMSpec{Name: "old-0", ClusterID: old.ID, TemplateID: tpl.ID})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		got, err := c.GetVM(ctx, vm.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status).To(Equal(ovirt.VMStatusDown))
	}).WithTimeout(10 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	err = c.Power(ctx, vm.ID, ovirt.PowerReset)
	g.Expect(err).To(MatchError(ovirt.ErrInvalid), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("Reset VM requires cluster compatibility version 4.6 or higher."))
	g.Expect(counterValue(e, "requests_total", "ResetVM", "400")).To(Equal(1.0))
}
