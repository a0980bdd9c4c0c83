package conformance

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

var (
	stack   *harness.Stack
	mgmt    client.Client
	workDir string
)

const (
	ns           = "conformance"
	providerName = "ovirt-sim"
	clusterName  = "conf"
	endpointHost = "10.0.1.100"
)

func TestConformance(t *testing.T) {
	RegisterFailHandler(Fail)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	suiteConfig.Timeout = 15 * time.Minute
	RunSpecs(t, "CAPOV conformance (Cluster API core reconcilers + CAPOV + oVirt simulator)", suiteConfig, reporterConfig)
}

var _ = BeforeSuite(func(ctx SpecContext) {
	var err error
	workDir, err = os.MkdirTemp("", "capov-conformance-")
	Expect(err).NotTo(HaveOccurred())
	seed := ovirtsim.DemoSeed()
	// A third oVirt cluster of the data center, for three failure domains (three hosts).
	seed.Clusters = append(seed.Clusters, ovirtsim.Cluster{Name: "Tertiary", DataCenter: "Default", Networks: []string{"ovirtmgmt"}})
	seed.Timings = ovirtsim.Timings{ImageLock: 200 * time.Millisecond, DiskLock: 100 * time.Millisecond,
		WaitForLaunch: 100 * time.Millisecond, PoweringUp: 200 * time.Millisecond, PoweringDown: 100 * time.Millisecond}
	stack, err = harness.StartStack(ctx, harness.StackOptions{
		WorkDir: workDir, Out: GinkgoWriter, Seed: seed, WithIPAM: true,
		Log: zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true), zap.Level(zapcore.InfoLevel)),
		ManagerArgs: []string{"--vm-poll-interval=300ms", "--node-poll-interval=300ms", "--retry-interval=2s",
			"--non-system-disk-retry-interval=2s", "--vm-shutdown-timeout=2s", "--provider-check-interval=30s"},
	})
	Expect(err).NotTo(HaveOccurred())
	mgmt = stack.MgmtClient()

	Expect(mgmt.Create(ctx, harness.Namespace("capov-system"))).To(Succeed())
	Expect(mgmt.Create(ctx, harness.Namespace(ns))).To(Succeed())
	Expect(mgmt.Create(ctx, harness.CredentialsSecret("capov-system", "sim-credentials", stack.SimUsername, stack.SimPassword))).To(Succeed())
	p := harness.Provider(providerName, stack.SimURL, "sim-credentials", stack.SimCAPEM)
	// The machines' spec.tags are created by the manager.
	p.Spec.CreateMissingTags = ptr.To(true)
	Expect(mgmt.Create(ctx, p)).To(Succeed())
}, NodeTimeout(10*time.Minute))

var _ = AfterSuite(func() {
	if stack != nil {
		stack.Stop()
	}
	if !CurrentSpecReport().Failed() && os.Getenv("CAPOV_KEEP_LOGS") == "" {
		_ = os.RemoveAll(workDir)
	} else {
		fmt.Fprintf(GinkgoWriter, "conformance: logs in %s\n", workDir)
	}
})

// On a failure, print what an operator would look at: CAPI's and CAPOV's objects with their
// conditions, the simulator's VMs and the tails of the logs.
var _ = ReportAfterEach(func(report SpecReport) {
	if !report.Failed() || stack == nil {
		return
	}
	ctx := context.Background()
	var b strings.Builder
	machines := &clusterv1.MachineList{}
	_ = mgmt.List(ctx, machines, client.InNamespace(ns))
	for _, m := range machines.Items {
		fmt.Fprintf(&b, "Machine %s phase=%s providerID=%q nodeRef=%q deleting=%t\n", m.Name, m.Status.Phase, m.Spec.ProviderID, m.Status.NodeRef.Name, !m.DeletionTimestamp.IsZero())
		for _, c := range m.Status.Conditions {
			fmt.Fprintf(&b, "    %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	oms := &infrav1.OVirtMachineList{}
	_ = mgmt.List(ctx, oms, client.InNamespace(ns))
	for _, om := range oms.Items {
		fmt.Fprintf(&b, "OVirtMachine %s provisioned=%t vmID=%s state=%s\n", om.Name, ptr.Deref(om.Status.Initialization.Provisioned, false), om.Status.VMID, om.Status.VMState)
		for _, c := range om.Status.Conditions {
			fmt.Fprintf(&b, "    %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	for _, vm := range stack.Sim.VMs() {
		fmt.Fprintf(&b, "VM %s %s status=%s disks=%d\n", vm.ID, vm.Name, vm.Status, len(vm.Disks))
	}
	fmt.Fprintf(&b, "--- manager log tail:\n%s\n", harness.Tail(stack.Manager.Logs(), 40))
	fmt.Fprintf(&b, "--- webhook log tail:\n%s\n", harness.Tail(stack.Webhook.Logs(), 10))
	AddReportEntry("state", b.String())
	fmt.Fprint(GinkgoWriter, b.String())
})
