// Package demo runs the whole provider locally: a management and a workload control plane,
// the oVirt simulator, the webhook and manager binaries and Cluster API's core reconcilers, each
// as its own process. It applies docs/examples, shows progress until everything is Ready and
// then prints what to try. `make demo` runs it.
package demo

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/harness"
	"github.com/capov/capov/test/ovirtsim"
)

// Options configure the demo.
type Options struct {
	// WorkDir holds logs, kubeconfigs and binaries.
	WorkDir string
	// ExitWhenReady stops the demo with success once everything is Ready.
	ExitWhenReady bool
	// Timeout bounds the wait for Ready.
	Timeout time.Duration
	// Out receives the demo's output.
	Out io.Writer
}

// Run runs the demo until ctx ends (Ctrl-C) or, with ExitWhenReady, until everything is Ready.
func Run(ctx context.Context, opts Options) error {
	out := opts.Out
	fmt.Fprintf(out, "CAPOV demo: logs and kubeconfigs in %s\n", opts.WorkDir)
	seed := ovirtsim.DemoSeed()
	// Realistic, short: oVirt takes a few seconds to copy disks and boot VMs.
	seed.Timings = ovirtsim.Timings{ImageLock: 3 * time.Second, CloneFactor: 2, DiskLock: time.Second,
		WaitForLaunch: time.Second, PoweringUp: 2 * time.Second, PoweringDown: time.Second, GuestAgentDelay: time.Second,
		// The workers' ubuntu-22.04 has no guest agent: VDSM keeps such VMs powering_up (about 60 s
		// on a real host; shortened for the demo).
		NoAgentPoweringUp: 15 * time.Second}
	seed.Latency = []ovirtsim.LatencyRule{{Min: 5 * time.Millisecond, Max: 20 * time.Millisecond}}

	stack, err := harness.StartStack(ctx, harness.StackOptions{
		WorkDir: opts.WorkDir, Out: prefixed(out, "  "), Seed: seed,
		SimulatorAsProcess: true, CAPIAsProcess: true, Log: logr.Discard(),
		ManagerArgs: []string{"--vm-poll-interval=2s", "--node-poll-interval=2s"},
	})
	if err != nil {
		return fmt.Errorf("starting the stack: %w", err)
	}
	defer func() {
		fmt.Fprintln(out, "Stopping every process")
		stack.Stop()
		fmt.Fprintf(out, "Stopped. Logs are in %s\n", filepath.Join(opts.WorkDir, "logs"))
	}()

	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	vars := map[string]string{
		"OVIRT_URL": stack.SimURL, "OVIRT_USERNAME": stack.SimUsername, "OVIRT_PASSWORD": stack.SimPassword,
		"OVIRT_CA_B64": base64.StdEncoding.EncodeToString(stack.SimCAPEM),
	}
	fmt.Fprintln(out, "Applying docs/examples (credentials Secret, OVirtProvider, Cluster + OVirtCluster, bootstrap data, a control-plane machine, 3 workers):")
	fmt.Fprintln(out, "  the CAPI objects are cluster.x-k8s.io/v1beta2; the CAPOV objects are the product doc's infrastructure.cluster.x-k8s.io/v1beta1,")
	fmt.Fprintln(out, "  admitted and converted by the webhook and stored as v1beta2, the version the manager and CAPI read")
	files, err := filepath.Glob(filepath.Join(root, "docs", "examples", "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		if err := apply(ctx, stack.KubeconfigPath, f, vars); err != nil {
			return err
		}
		if strings.HasSuffix(f, "03-cluster.yaml") {
			// What a control-plane provider does: the kubeconfig of the workload cluster.
			c := harness.Cluster("demo", "demo")
			if err := stack.MgmtClient().Create(ctx, harness.KubeconfigSecret(c, stack.WorkloadKubeconfig)); err != nil {
				return fmt.Errorf("creating the workload kubeconfig Secret: %w", err)
			}
		}
	}

	ready, err := watchUntilReady(ctx, stack, out, opts.Timeout)
	if err != nil || !ready {
		diagnose(ctx, stack, out)
		if err == nil {
			err = fmt.Errorf("not everything was Ready after %s", opts.Timeout)
		}
		return err
	}
	showBothVersions(ctx, stack.MgmtClient(), out)
	printNextSteps(out, stack, opts.WorkDir)
	if opts.ExitWhenReady {
		return nil
	}
	fmt.Fprintln(out, "The demo keeps running; press Ctrl-C to stop every process.")
	<-ctx.Done()
	return nil
}

func apply(ctx context.Context, kubeconfig, file string, vars map[string]string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	manifest := os.Expand(string(raw), func(k string) string { return vars[k] })
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w\n%s", filepath.Base(file), err, b.String())
	}
	return nil
}

// watchUntilReady prints a `kubectl get capovp,capovc,capovm` style table whenever it changes.
func watchUntilReady(ctx context.Context, stack *harness.Stack, out io.Writer, timeout time.Duration) (bool, error) {
	c := stack.MgmtClient()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		table, ready, err := status(ctx, c)
		if err == nil && table != last {
			fmt.Fprintf(out, "\n%s  %s\n", time.Now().Format("15:04:05"), strings.ReplaceAll(strings.TrimRight(table, "\n"), "\n", "\n  "))
			last = table
		}
		if ready {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		for _, p := range []*harness.Process{stack.Manager, stack.Webhook, stack.CAPI, stack.SimProcess} {
			if p == nil {
				continue
			}
			if exited, perr := p.Exited(); exited {
				return false, fmt.Errorf("%s exited: %w", p.Name, perr)
			}
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// status renders the objects and reports whether all of them are Ready: the provider, the
// cluster, four machines (one control plane, three workers) and their CAPI Machines Running.
func status(ctx context.Context, c client.Client) (string, bool, error) {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	ready := true
	providers := &infrav1.OVirtProviderList{}
	if err := c.List(ctx, providers); err != nil {
		return "", false, err
	}
	fmt.Fprintln(w, "OVIRTPROVIDER\tREADY\tVERSION\tREASON")
	for _, p := range providers.Items {
		fmt.Fprintf(w, "capovp/%s\t%s\t%s\t%s\n", p.Name, conditionStatus(p.Status.Conditions, infrav1.ReadyCondition), p.Status.EngineVersion,
			conditionReason(p.Status.Conditions, infrav1.CanConnectToOVirtCondition))
		ready = ready && isTrue(p.Status.Conditions, infrav1.ReadyCondition)
	}
	clusters := &infrav1.OVirtClusterList{}
	if err := c.List(ctx, clusters, client.InNamespace("demo")); err != nil {
		return "", false, err
	}
	fmt.Fprintln(w, "OVIRTCLUSTER\tCONTROLPLANE ENDPOINT\tREADY")
	for _, oc := range clusters.Items {
		fmt.Fprintf(w, "capovc/%s\t%s\t%s\n", oc.Name, oc.Spec.ControlPlaneEndpoint.Host, conditionStatus(oc.Status.Conditions, infrav1.ReadyCondition))
		ready = ready && isTrue(oc.Status.Conditions, infrav1.ReadyCondition)
	}
	machines := &infrav1.OVirtMachineList{}
	if err := c.List(ctx, machines, client.InNamespace("demo")); err != nil {
		return "", false, err
	}
	capiMachines := &clusterv1.MachineList{}
	if err := c.List(ctx, capiMachines, client.InNamespace("demo")); err != nil {
		return "", false, err
	}
	phase := map[string]string{}
	for _, m := range capiMachines.Items {
		phase[m.Spec.InfrastructureRef.Name] = m.Status.Phase
	}
	fmt.Fprintln(w, "OVIRTMACHINE\tREADY\tOVIRT STATE\tMACHINE PHASE\tREASON")
	for _, m := range machines.Items {
		reason := ""
		if !isTrue(m.Status.Conditions, infrav1.ReadyCondition) {
			reason = conditionReason(m.Status.Conditions, infrav1.ReadyCondition)
		}
		fmt.Fprintf(w, "capovm/%s\t%s\t%s\t%s\t%s\n", m.Name, conditionStatus(m.Status.Conditions, infrav1.ReadyCondition), m.Status.VMState, phase[m.Name], reason)
		ready = ready && isTrue(m.Status.Conditions, infrav1.ReadyCondition) && phase[m.Name] == string(clusterv1.MachinePhaseRunning)
	}
	_ = w.Flush()
	return b.String(), ready && len(providers.Items) > 0 && len(clusters.Items) > 0 && len(machines.Items) == 4, nil
}

// diagnose prints what an operator would look at when the demo did not become Ready.
func diagnose(ctx context.Context, stack *harness.Stack, out io.Writer) {
	fmt.Fprintln(out, "\nDIAGNOSIS: not everything became Ready.")
	machines := &infrav1.OVirtMachineList{}
	if err := stack.MgmtClient().List(ctx, machines); err == nil {
		for _, m := range machines.Items {
			fmt.Fprintf(out, "OVirtMachine %s/%s Ready=%s vmID=%s\n", m.Namespace, m.Name, conditionStatus(m.Status.Conditions, infrav1.ReadyCondition), m.Status.VMID)
			for _, c := range m.Status.Conditions {
				fmt.Fprintf(out, "  %s=%s %s %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	for _, p := range []*harness.Process{stack.Manager, stack.Webhook, stack.CAPI, stack.SimProcess} {
		if p != nil {
			fmt.Fprintf(out, "--- last lines of %s (%s):\n%s\n", p.Name, p.LogPath, harness.Tail(p.Logs(), 15))
		}
	}
}

// showBothVersions reads the control-plane machine as the product doc's v1beta1 and as the
// stored v1beta2: the same object, converted by the webhook.
func showBothVersions(ctx context.Context, c client.Client, out io.Writer) {
	key := client.ObjectKey{Namespace: "demo", Name: "demo-control-plane-0"}
	v1 := &unstructured.Unstructured{}
	v1.SetAPIVersion(infrav1.GroupVersion.Group + "/v1beta1")
	v1.SetKind("OVirtMachine")
	v2 := &infrav1.OVirtMachine{}
	if err := c.Get(ctx, key, v1); err != nil {
		fmt.Fprintf(out, "reading %s as v1beta1: %v\n", key, err)
		return
	}
	if err := c.Get(ctx, key, v2); err != nil {
		fmt.Fprintf(out, "reading %s as v1beta2: %v\n", key, err)
		return
	}
	ready, _, _ := unstructured.NestedBool(v1.Object, "status", "ready")
	provisioned := v2.Status.Initialization.Provisioned != nil && *v2.Status.Initialization.Provisioned
	fmt.Fprintf(out, "\ncapovm/%s in both API versions (one stored object, converted by the webhook):\n", key.Name)
	fmt.Fprintf(out, "  v1beta1 (product doc): status.ready=%t, %d conditions with a severity\n", ready, len(nestedSlice(v1, "status", "conditions")))
	fmt.Fprintf(out, "  v1beta2 (stored, read by CAPI): status.initialization.provisioned=%t, Ready=%s, %d metav1 conditions\n",
		provisioned, conditionStatus(v2.Status.Conditions, infrav1.ReadyCondition), len(v2.Status.Conditions))
}

func nestedSlice(u *unstructured.Unstructured, path ...string) []any {
	s, _, _ := unstructured.NestedSlice(u.Object, path...)
	return s
}

func isTrue(conds []metav1.Condition, t string) bool { return meta.IsStatusConditionTrue(conds, t) }

func conditionStatus(conds []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}

func conditionReason(conds []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return c.Reason
	}
	return ""
}

func printNextSteps(out io.Writer, stack *harness.Stack, workDir string) {
	kc := stack.KubeconfigPath
	fmt.Fprintf(out, `
Everything is Ready. The management cluster is at:

  export KUBECONFIG=%[1]s

Things to try:
  kubectl get capovp,capovc,capovm -A -o wide
  kubectl get capovm.v1beta1.infrastructure.cluster.x-k8s.io -n demo      # the same machines in the product doc's v1beta1
  kubectl get machines -n demo
  kubectl get capovm -n demo -o jsonpath='{range .items[0].status.conditions[*]}{.type}{"\t"}{.status}{"\t"}{.reason}{"\n"}{end}'
  kubectl get capovm -n demo -o custom-columns='NAME:.metadata.name,MACHINEON:.status.conditions[?(@.type=="MachineOn")].reason,ADDRESSES:.status.addresses[*].address'   # the workers' image has no guest agent: addresses from their Nodes
  kubectl scale machinedeployment demo-workers -n demo --replicas=5      # two more VMs appear
  kubectl delete machine -n demo $(kubectl get machines -n demo -o name | grep workers | head -1 | cut -d/ -f2)
  kubectl apply -f docs/examples/bad/capov-affinity-group.yaml           # rejected by the webhook
  kubectl apply -f docs/examples/bad/guaranteed-above-size.yaml          # rejected by the API server
  kubectl get nodes --kubeconfig %[2]s                                   # the workload cluster's Nodes
  TOKEN=$(kubectl create token metrics-scraper -n capov-system)
  curl -sk -H "Authorization: Bearer $TOKEN" https://%[3]s/metrics | grep capov_ovirt_requests_total
  curl -sk %[4]s/sim/state | head                                        # the simulated oVirt

Logs: %[5]s
`, kc, filepath.Join(workDir, "workload.kubeconfig"), stack.ManagerMetricsAddr, stack.SimAdminURL, filepath.Join(workDir, "logs"))
}

type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func prefixed(w io.Writer, prefix string) io.Writer { return prefixWriter{w: w, prefix: prefix} }
