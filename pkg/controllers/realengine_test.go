package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/capov/capov/pkg/ovirt"
)

// What a real Engine reports for a Kubernetes node: every guest interface for every NIC, in no
// stable order, with one kube-ipvs0 address per Service.
func kubernetesNodeVM(services int) *ovirt.VM {
	ipvs := ovirt.ReportedDevice{Name: "kube-ipvs0", MAC: "96:2b:7c:11:22:33"}
	for i := range services {
		ipvs.IPs = append(ipvs.IPs, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1))
	}
	return &ovirt.VM{
		ID: "vm-1",
		NICs: []ovirt.NIC{
			{ID: "n2", Name: "nic2", MAC: "56:6F:1A:00:00:02"},
			{ID: "n1", Name: "nic1", MAC: "56:6f:1a:00:00:01"},
		},
		ReportedDevices: []ovirt.ReportedDevice{
			ipvs,
			{Name: "cni0", MAC: "0a:58:0a:f4:00:01", IPs: []string{"10.244.0.1"}},
			{Name: "eth1", MAC: "56:6f:1a:00:00:02", IPs: []string{"fe80::546f:1aff:fe00:2", "192.168.50.7"}},
			{Name: "lo", MAC: "00:00:00:00:00:00", IPs: []string{"127.0.0.1", "::1"}},
			{Name: "flannel.1", MAC: "c2:11:22:33:44:55", IPs: []string{"10.244.0.0"}},
			{Name: "eth0", MAC: "56:6F:1A:00:00:01", IPs: []string{"2001:db8::5", "10.0.1.100", "10.0.0.5", "169.254.1.1"}},
			{Name: "docker0", MAC: "02:42:ac:11:00:01", IPs: []string{"172.17.0.1"}},
		},
	}
}

func TestMachineAddressesKeepOnlyTheVMNICsInAStableOrder(t *testing.T) {
	g := NewWithT(t)
	vm := kubernetesNodeVM(300)
	want := []clusterv1.MachineAddress{
		{Type: clusterv1.MachineInternalIP, Address: "10.0.0.5"},
		{Type: clusterv1.MachineInternalIP, Address: "2001:db8::5"},
		{Type: clusterv1.MachineInternalIP, Address: "192.168.50.7"},
	}
	g.Expect(machineAddresses(vm, "10.0.1.100")).To(Equal(want), "nic1 then nic2, IPv4 first, no lo/link-local/CNI/Service IPs, no endpoint VIP")

	// The same devices in another order give the same addresses.
	for i := range vm.ReportedDevices {
		j := len(vm.ReportedDevices) - 1 - i
		if i < j {
			vm.ReportedDevices[i], vm.ReportedDevices[j] = vm.ReportedDevices[j], vm.ReportedDevices[i]
		}
	}
	g.Expect(machineAddresses(vm, "10.0.1.100")).To(Equal(want))
}

func TestMachineAddressesNeverExceedTheStatusLimit(t *testing.T) {
	g := NewWithT(t)
	vm := &ovirt.VM{NICs: []ovirt.NIC{{Name: "nic1", MAC: "56:6f:1a:00:00:01"}}}
	dev := ovirt.ReportedDevice{Name: "eth0", MAC: "56:6f:1a:00:00:01"}
	for i := range 100 {
		dev.IPs = append(dev.IPs, fmt.Sprintf("10.0.%d.%d", i/200, i%200+1))
	}
	vm.ReportedDevices = []ovirt.ReportedDevice{dev}
	g.Expect(machineAddresses(vm, "")).To(HaveLen(maxAddresses))
}

func TestMachineAddressesIgnoreNICsWithoutOrWithZeroMAC(t *testing.T) {
	g := NewWithT(t)
	vm := &ovirt.VM{
		NICs:            []ovirt.NIC{{Name: "nic1"}, {Name: "nic2", MAC: "00:00:00:00:00:00"}},
		ReportedDevices: []ovirt.ReportedDevice{{Name: "lo", MAC: "00:00:00:00:00:00", IPs: []string{"10.1.1.1"}}},
	}
	g.Expect(machineAddresses(vm, "")).To(BeEmpty())
	g.Expect(machineAddresses(&ovirt.VM{NICs: vm.NICs}, "")).To(BeEmpty(), "no guest agent: nothing reported")
}

func TestNodeAddressesAreTheFallback(t *testing.T) {
	g := NewWithT(t)
	node := &corev1.Node{}
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "w-1"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.9"},
		{Type: corev1.NodeInternalIP, Address: "10.0.1.100"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.4"},
		{Type: corev1.NodeInternalIP, Address: "10.0.0.9"},
	}
	g.Expect(nodeAddresses(node, "10.0.1.100")).To(Equal([]clusterv1.MachineAddress{
		{Type: clusterv1.MachineInternalIP, Address: "10.0.0.9"},
		{Type: clusterv1.MachineExternalIP, Address: "203.0.113.4"},
	}))
	g.Expect(nodeAddresses(&corev1.Node{}, "")).To(BeEmpty())
}

func TestVMNamesFitTheEngine(t *testing.T) {
	g := NewWithT(t)
	short := "md-0-abcde"
	g.Expect(VMNameFor("ns", short)).To(Equal(short))
	g.Expect(hostNameFor("ns", short)).To(Equal(short))

	sixtyFour := strings.Repeat("a", 64)
	g.Expect(VMNameFor("ns", sixtyFour)).To(Equal(sixtyFour), "the Engine takes 64")
	g.Expect(len(hostNameFor("ns", sixtyFour))).To(BeNumerically("<=", 63), "a DNS label takes 63")

	long := "my-cluster-with-a-long-name-md-0-workers-xl-7d9f8c6b5d-" + strings.Repeat("x", 20) + "-k2j4q"
	name := VMNameFor("team-a", long)
	g.Expect(len(name)).To(BeNumerically("<=", 64))
	g.Expect(name).To(HavePrefix(long[:40]), "readable prefix")
	g.Expect(name).To(MatchRegexp(`-[0-9a-f]{8}$`))
	g.Expect(VMNameFor("team-a", long)).To(Equal(name), "deterministic")
	g.Expect(hostNameFor("team-a", long)).To(Equal(name), "the host name is the VM name")
	g.Expect(VMNameFor("team-b", long)).NotTo(Equal(name), "unique per namespace/name")
	g.Expect(VMNameFor("team-a", long+"z")).NotTo(Equal(name), "unique per name")

	// A cut that ends in a dash or a dot is trimmed: the name stays a valid host name.
	dashy := strings.Repeat("a", 53) + "-.-" + strings.Repeat("b", 20)
	g.Expect(VMNameFor("ns", dashy)).To(MatchRegexp(`^a{53}-[0-9a-f]{8}$`))
}

func TestDescriptionsAreCutSafely(t *testing.T) {
	g := NewWithT(t)
	g.Expect(truncateText("short", 255)).To(Equal("short"))
	long := strings.Repeat("é", 200) // 400 bytes
	got := truncateText(long, 255)
	g.Expect(len(got)).To(BeNumerically("<=", 255))
	g.Expect(got).To(HaveSuffix("..."))
	g.Expect(strings.ToValidUTF8(got, "?")).To(Equal(got), "no split character")
}

func TestBootstrapFormatMustFitTheTemplateOSType(t *testing.T) {
	rhcos := &ovirt.Template{Name: "rhcos-4.14", OSType: "rhcos_x64"}
	ubuntu := &ovirt.Template{Name: "ubuntu-22.04", OSType: "other_linux"}
	for _, tc := range []struct {
		name  string
		boot  bootstrapData
		tpl   *ovirt.Template
		fails bool
	}{
		{"cloud-config on a cloud-init template works", bootstrapData{format: formatCloudConfig}, ubuntu, false},
		{"ignition on rhcos_x64 works", bootstrapData{format: formatIgnition}, rhcos, false},
		{"cloud-config on rhcos_x64 is refused", bootstrapData{format: formatCloudConfig}, rhcos, true},
		{"ignition on a cloud-init template is refused", bootstrapData{format: formatIgnition}, ubuntu, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			msg := bootstrapMismatch(&tc.boot, tc.tpl, ptr.To("boot-1"))
			if !tc.fails {
				g.Expect(msg).To(BeEmpty())
				return
			}
			g.Expect(msg).To(ContainSubstring(tc.boot.format), "names the format")
			g.Expect(msg).To(ContainSubstring(tc.tpl.Name), "names the template")
			g.Expect(msg).To(ContainSubstring(tc.tpl.OSType), "names the OS type")
		})
	}
}

func TestIgnitionConfigsAreJSONWithAVersion(t *testing.T) {
	g := NewWithT(t)
	g.Expect(isIgnitionConfig([]byte(`{"ignition":{"version":"3.2.0"}}`))).To(BeTrue())
	g.Expect(isIgnitionConfig([]byte("#cloud-config\n"))).To(BeFalse())
	g.Expect(isIgnitionConfig([]byte(`{"storage":{}}`))).To(BeFalse())
	g.Expect(isIgnitionConfig([]byte(`[]`))).To(BeFalse())
}

func TestEngineRefusalsAreNotLocks(t *testing.T) {
	g := NewWithT(t)
	refusal := func(status int, kinds ...error) error {
		return &ovirt.Error{Op: "UpdateDisk", Status: status, Detail: "Operation Failed", Kinds: kinds}
	}
	g.Expect(engineRefused(refusal(409, ovirt.ErrConflict))).To(BeTrue(), "low disk space, NIC name in use")
	g.Expect(engineRefused(refusal(400, ovirt.ErrInvalid))).To(BeTrue())
	g.Expect(engineRefused(refusal(404, ovirt.ErrNotFound))).To(BeTrue())
	g.Expect(engineRefused(refusal(403))).To(BeTrue(), "a permission refusal")
	g.Expect(engineRefused(refusal(409, ovirt.ErrConflict, ovirt.ErrLocked))).To(BeFalse(), "locks are waited for")
	g.Expect(engineRefused(refusal(503, ovirt.ErrUnreachable))).To(BeFalse())
	g.Expect(engineRefused(errors.New("connection reset"))).To(BeFalse())
}

func TestTheDeferredPatchOutlivesTheReconcileContext(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the reconcile timed out, or the manager is shutting down
	patchCtx, done := deferredPatchContext(ctx)
	defer done()
	g.Expect(patchCtx.Err()).NotTo(HaveOccurred(), "the status patch still runs")
	deadline, ok := patchCtx.Deadline()
	g.Expect(ok).To(BeTrue(), "but bounded")
	g.Expect(time.Until(deadline)).To(BeNumerically("<=", deferredPatchTimeout))
}
