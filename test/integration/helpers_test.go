package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta1conditions "sigs.k8s.io/cluster-api/util/conditions/deprecated/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

const (
	timeout  = 60 * time.Second
	interval = 100 * time.Millisecond
	// endpointHost is the control-plane VIP of every test cluster; the manager must never
	// report it as a machine address.
	endpointHost = "10.0.1.100"
)

// testCluster is a CAPI Cluster with its OVirtCluster, kubeconfig Secret and provisioned
// infrastructure, in a namespace of its own.
type testCluster struct {
	ns      string
	filter  string
	cluster *clusterv1.Cluster
	oc      *infrav1.OVirtCluster
}

func filterLabels(filter string) map[string]string {
	return map[string]string{"cluster.x-k8s.io/watch-filter": filter}
}

// newTestCluster creates a namespace and a provisioned Cluster whose objects carry the watch
// filter of the manager that should act on them.
func newTestCluster(t *testing.T, filter string) *testCluster {
	t.Helper()
	return newTestClusterWith(t, filter, nil)
}

// newTestClusterWith is newTestCluster with a change of the OVirtCluster before it is created;
// the Cluster is marked provisioned only when the OVirtCluster has an endpoint host (else the
// test waits for the manager).
func newTestClusterWith(t *testing.T, filter string, mutate func(*infrav1.OVirtCluster)) *testCluster {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := "t-" + strings.ToLower(rand.String(6))
	g.Expect(k8s.Create(ctx, harness.Namespace(ns))).To(Succeed())
	cluster := harness.Cluster(ns, "c1")
	cluster.Labels = filterLabels(filter)
	g.Expect(k8s.Create(ctx, cluster)).To(Succeed())
	oc := harness.OVirtCluster(cluster, endpointHost, 6443)
	for k, v := range filterLabels(filter) {
		oc.Labels[k] = v
	}
	if mutate != nil {
		mutate(oc)
	}
	g.Expect(k8s.Create(ctx, oc)).To(Succeed())
	g.Expect(k8s.Create(ctx, harness.KubeconfigSecret(cluster, kubeconfig))).To(Succeed())
	if oc.Spec.ControlPlaneEndpoint.Host != "" {
		g.Expect(harness.SetInfrastructureProvisioned(ctx, k8s, cluster)).To(Succeed())
	}
	return &testCluster{ns: ns, filter: filter, cluster: cluster, oc: oc}
}

// Realistic bootstrap data: Ignition for rhcos_x64 templates, cloud-config for the others (the
// Engine refuses to start an rhcos_x64 VM whose custom script is not Ignition JSON).
const (
	ignitionConfig = `{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core"}]}}`
	cloudConfig    = "#cloud-config\nruncmd: [kubeadm join]\n"
	// noAgentTemplate is a cloud-init template whose image has no qemu-guest-agent.
	noAgentTemplate = "debian-12-minimal"
)

// vmSpec is the product doc's example machine (rhcos-4.14: Ignition bootstrap data).
func vmSpec() infrav1.OVirtVMSpec {
	return infrav1.OVirtVMSpec{
		Provider: mainProvider, OVirtCluster: "Default", Template: "rhcos-4.14",
		VMType:       infrav1.VMTypeServer,
		CPU:          &infrav1.CPU{Sockets: 1, Cores: 4, Threads: 1},
		Memory:       &infrav1.Memory{SizeMB: 8192, GuaranteedMB: 4096},
		OSDiskSizeGB: 80,
		NICs:         []infrav1.NIC{{VnicProfile: "ovirtmgmt"}},
	}
}

// newMachine creates a Machine (with bootstrap data unless bootstrap is "", format ignition when
// it is JSON, else cloud-config) and its OVirtMachine. The machine name is unique in the simulator.
func (tc *testCluster) newMachine(t *testing.T, spec infrav1.OVirtVMSpec, bootstrap string) (*clusterv1.Machine, *infrav1.OVirtMachine) {
	t.Helper()
	return tc.newMachineLabelled(t, spec, bootstrap, nil)
}

// newMachineWithLabels is newMachine with Ignition bootstrap data and extra labels on both the
// Machine and the OVirtMachine (as Cluster API's MachineSet and KubeadmControlPlane set them).
func (tc *testCluster) newMachineWithLabels(t *testing.T, spec infrav1.OVirtVMSpec, labels map[string]string) (*clusterv1.Machine, *infrav1.OVirtMachine) {
	t.Helper()
	return tc.newMachineLabelled(t, spec, ignitionConfig, labels)
}

func (tc *testCluster) newMachineLabelled(t *testing.T, spec infrav1.OVirtVMSpec, bootstrap string, labels map[string]string) (*clusterv1.Machine, *infrav1.OVirtMachine) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := tc.ns + "-w-" + strings.ToLower(rand.String(4))
	secret := ""
	if bootstrap != "" {
		secret = name + "-bootstrap"
		format := "cloud-config"
		if strings.HasPrefix(bootstrap, "{") {
			format = "ignition"
		}
		g.Expect(k8s.Create(ctx, harness.BootstrapSecret(tc.ns, secret, tc.cluster.Name, bootstrap, format))).To(Succeed())
	}
	m := harness.Machine(tc.cluster, name, secret)
	for k, v := range filterLabels(tc.filter) {
		m.Labels[k] = v
	}
	for k, v := range labels {
		m.Labels[k] = v
	}
	g.Expect(k8s.Create(ctx, m)).To(Succeed())
	om := harness.OVirtMachine(m, spec)
	for k, v := range filterLabels(tc.filter) {
		om.Labels[k] = v
	}
	for k, v := range labels {
		om.Labels[k] = v
	}
	g.Expect(k8s.Create(ctx, om)).To(Succeed())
	return m, om
}

func getOM(g Gomega, om *infrav1.OVirtMachine) *infrav1.OVirtMachine {
	out := &infrav1.OVirtMachine{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(om), out)).To(Succeed())
	return out
}

// condition describes an expected condition; empty fields are not checked.
type condition struct {
	Type     clusterv1.ConditionType
	Status   corev1.ConditionStatus
	Reason   string
	Severity clusterv1.ConditionSeverity
	Message  string // substring
}

func (c condition) String() string {
	return fmt.Sprintf("%s=%s reason=%q severity=%q message~%q", c.Type, c.Status, c.Reason, c.Severity, c.Message)
}

func matches(got *clusterv1.Condition, want condition) bool {
	return got != nil && got.Status == want.Status &&
		(want.Reason == "" || got.Reason == want.Reason) &&
		(want.Severity == "" || got.Severity == want.Severity) &&
		strings.Contains(got.Message, want.Message)
}

// matchesV1Beta2 checks the status.conditions twin of a v1beta1-format condition: same status,
// reason and message (a reason-less v1beta1 condition has a placeholder reason there).
func matchesV1Beta2(got *metav1.Condition, want condition) bool {
	return got != nil && string(got.Status) == string(want.Status) &&
		(want.Reason == "" || got.Reason == want.Reason) &&
		strings.Contains(got.Message, want.Message)
}

// eventuallyCondition waits until the OVirtMachine has the condition in both formats:
// status.deprecated.v1beta1.conditions (what a v1beta1 reader sees in status.conditions, with
// the severity) and status.conditions. It returns the object.
//
// Cluster API's patch helper writes a reconcile's conditions in a request of their own, before
// the rest of the status: the condition can be seen while a field written by the same reconcile
// (status.host, a cleared failure) still holds its old value. A test that asserts such a field
// passes it as also, checked on the same read as the condition.
func eventuallyCondition(t *testing.T, om *infrav1.OVirtMachine, want condition, also ...func(Gomega, *infrav1.OVirtMachine)) *infrav1.OVirtMachine {
	t.Helper()
	var last *infrav1.OVirtMachine
	NewWithT(t).Eventually(func(g Gomega) {
		last = getOM(g, om)
		got := v1beta1conditions.Get(last, want.Type)
		g.Expect(matches(got, want)).To(BeTrue(), "want %s, have %s", want, describeConditions(last))
		g.Expect(matchesV1Beta2(conditions.Get(last, string(want.Type)), want)).To(BeTrue(), "want %s in status.conditions, have %s", want, describeConditions(last))
		for _, check := range also {
			check(g, last)
		}
	}, timeout, interval).Should(Succeed())
	return last
}

// describeConditions lists both condition formats of an object for a failure message.
func describeConditions(o interface {
	conditions.Getter
	v1beta1conditions.Getter
}) string {
	var b strings.Builder
	b.WriteString("\n status.deprecated.v1beta1.conditions:")
	for _, c := range o.GetV1Beta1Conditions() {
		fmt.Fprintf(&b, "\n  %s=%s reason=%q severity=%q message=%q", c.Type, c.Status, c.Reason, c.Severity, c.Message)
	}
	b.WriteString("\n status.conditions:")
	for _, c := range o.GetConditions() {
		fmt.Fprintf(&b, "\n  %s=%s reason=%q message=%q", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// failureOf returns status.deprecated.v1beta1.failureReason and failureMessage (the v1beta1
// status.failureReason/failureMessage).
func failureOf(om *infrav1.OVirtMachine) (reason, message *string) {
	if d := om.Status.Deprecated; d != nil && d.V1Beta1 != nil {
		return d.V1Beta1.FailureReason, d.V1Beta1.FailureMessage
	}
	return nil, nil
}

// failureCleared is an eventuallyCondition check: the machine has no failureReason or
// failureMessage.
func failureCleared(g Gomega, om *infrav1.OVirtMachine) {
	reason, message := failureOf(om)
	g.Expect(reason).To(BeNil(), "failureReason")
	g.Expect(message).To(BeNil(), "failureMessage")
}

// providerV1Beta1 returns status.deprecated.v1beta1 of an OVirtProvider (empty when unset).
func providerV1Beta1(p *infrav1.OVirtProvider) infrav1.OVirtProviderV1Beta1DeprecatedStatus {
	if d := p.Status.Deprecated; d != nil && d.V1Beta1 != nil {
		return *d.V1Beta1
	}
	return infrav1.OVirtProviderV1Beta1DeprecatedStatus{}
}

// provisioned reports status.initialization.provisioned.
func provisioned(om *infrav1.OVirtMachine) bool {
	return ptr.Deref(om.Status.Initialization.Provisioned, false)
}

// eventuallyEvent waits for an event with reason about the object and returns its note.
func eventuallyEvent(t *testing.T, obj client.Object, reason string) string {
	t.Helper()
	var note string
	NewWithT(t).Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(k8s.List(context.Background(), list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == obj.GetName() {
				reasons = append(reasons, e.Reason)
				if e.Reason == reason {
					note = e.Note
					return
				}
			}
		}
		g.Expect(reasons).To(ContainElement(reason))
	}, timeout, interval).Should(Succeed())
	return note
}

// eventuallyVM waits until the simulator has a VM of that name matching check.
func eventuallyVM(t *testing.T, name string, check func(g Gomega, vm ovirtsim.VMState)) ovirtsim.VMState {
	t.Helper()
	var vm ovirtsim.VMState
	NewWithT(t).Eventually(func(g Gomega) {
		var ok bool
		vm, ok = sim.VMByName(name)
		g.Expect(ok).To(BeTrue(), "VM %s not in the simulator", name)
		if check != nil {
			check(g, vm)
		}
	}, timeout, interval).Should(Succeed())
	return vm
}

// registerNode acts as kubelet for the VM of om once it is up.
func registerNode(t *testing.T, om *infrav1.OVirtMachine) *corev1.Node {
	t.Helper()
	vm := eventuallyVM(t, om.Name, func(g Gomega, vm ovirtsim.VMState) { g.Expect(vm.Status).To(Equal("up")) })
	node, err := harness.RegisterNode(context.Background(), k8s, om.Name, vm.ID, vm.IPs)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	return node
}

// deleteAndWait deletes the OVirtMachine and waits until it is gone.
func deleteAndWait(t *testing.T, om *infrav1.OVirtMachine) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, om))).To(Succeed())
	g.Eventually(func() bool {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(om), &infrav1.OVirtMachine{})
		return apierrors.IsNotFound(err)
	}, timeout, interval).Should(BeTrue())
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func metaNS(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// eventuallyOM waits until check passes on the OVirtMachine. The patch helper writes
// conditions and the other status fields in separate requests, so checks that span both must
// be retried together.
func eventuallyOM(t *testing.T, om *infrav1.OVirtMachine, check func(g Gomega, om *infrav1.OVirtMachine)) *infrav1.OVirtMachine {
	t.Helper()
	var last *infrav1.OVirtMachine
	NewWithT(t).Eventually(func(g Gomega) {
		last = getOM(g, om)
		check(g, last)
	}, timeout, interval).Should(Succeed())
	return last
}

// settledRequestCount returns the simulator's count of requests to method and path once it
// stopped moving: the simulator counts a request after its answer is written, so a count read
// right after the manager acted may still miss its last call.
func settledRequestCount(t *testing.T, method, path string) int {
	t.Helper()
	prev := -1
	NewWithT(t).Eventually(func() bool {
		n := sim.RequestCount(method, path)
		stable := n == prev
		prev = n
		return stable
	}, timeout, 300*time.Millisecond).Should(BeTrue())
	return prev
}
