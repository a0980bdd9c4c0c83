package harness

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	"github.com/capov/capov/test/envtest"
	"github.com/capov/capov/test/ovirtsim"
)

// The upgrade tests install a release as an operator does and upgrade it: test/upgrade runs the
// binaries as processes on envtest, test/e2e/operator as pods on a real node. What they share is
// here.

// injectCAFrom is cert-manager's cainjector annotation; a configuration pointed at the webhook
// process loses it, or the injector would put the Certificate's CA back over envtest's.
const injectCAFrom = "cert-manager.io/inject-ca-from"

// UseWebhookProcess points every webhook of the admission configurations ours selects at the
// stack's webhook process (its URL and envtest's CA instead of the webhook Service and
// cert-manager's CA injection, which envtest cannot reach) and deletes every other mutating and
// validating configuration (envtest's registration of the previous binaries, other providers'
// configurations whose Services no process serves). It returns the configurations it pointed
// and a function that puts their Service client configurations back as they were installed:
// Helm's three-way merge of an upgrade would otherwise remove the URL and leave neither.
func UseWebhookProcess(ctx context.Context, c client.Client, s *Stack, ours func(client.Object) bool) (pointed []client.Object, restore func() error, err error) {
	ca := s.Mgmt.Env.WebhookInstallOptions.LocalServingCAData
	saved := map[string]admissionregistrationv1.WebhookClientConfig{}
	savedAnnotations := map[string]string{}
	cfgs, err := webhookConfigurations(ctx, c, ours)
	if err != nil {
		return nil, nil, err
	}
	for _, cfg := range cfgs {
		for name, cc := range webhookClientConfigs(cfg) {
			if cc.Service == nil {
				continue
			}
			saved[webhookKey(cfg, name)] = *cc.DeepCopy()
			url := "https://" + s.WebhookAddr
			if cc.Service.Path != nil {
				url += *cc.Service.Path
			}
			cc.Service, cc.URL, cc.CABundle = nil, &url, ca
		}
		if a := cfg.GetAnnotations(); a[injectCAFrom] != "" {
			savedAnnotations[webhookKey(cfg, "")] = a[injectCAFrom]
			delete(a, injectCAFrom)
			cfg.SetAnnotations(a)
		}
		if err := c.Update(ctx, cfg); err != nil {
			return nil, nil, fmt.Errorf("pointing %s at the webhook process: %w", cfg.GetName(), err)
		}
		pointed = append(pointed, cfg)
	}
	return pointed, func() error {
		cfgs, err := webhookConfigurations(ctx, c, ours)
		if err != nil {
			return err
		}
		for _, cfg := range cfgs {
			for name, cc := range webhookClientConfigs(cfg) {
				if orig, ok := saved[webhookKey(cfg, name)]; ok {
					*cc = orig
				}
			}
			if v, ok := savedAnnotations[webhookKey(cfg, "")]; ok {
				a := cfg.GetAnnotations()
				if a == nil {
					a = map[string]string{}
				}
				a[injectCAFrom] = v
				cfg.SetAnnotations(a)
			}
			if err := c.Update(ctx, cfg); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// webhookConfigurations lists the mutating and validating webhook configurations ours selects,
// and deletes the others.
func webhookConfigurations(ctx context.Context, c client.Client, ours func(client.Object) bool) ([]client.Object, error) {
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, mutating); err != nil {
		return nil, err
	}
	if err := c.List(ctx, validating); err != nil {
		return nil, err
	}
	var all, out []client.Object
	for i := range mutating.Items {
		all = append(all, &mutating.Items[i])
	}
	for i := range validating.Items {
		all = append(all, &validating.Items[i])
	}
	for _, o := range all {
		if ours(o) {
			out = append(out, o)
			continue
		}
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
	}
	return out, nil
}

// webhookClientConfigs returns the client configuration of each webhook of a mutating or
// validating webhook configuration, by webhook name, for changing in place.
func webhookClientConfigs(o client.Object) map[string]*admissionregistrationv1.WebhookClientConfig {
	out := map[string]*admissionregistrationv1.WebhookClientConfig{}
	switch cfg := o.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for j := range cfg.Webhooks {
			out[cfg.Webhooks[j].Name] = &cfg.Webhooks[j].ClientConfig
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for j := range cfg.Webhooks {
			out[cfg.Webhooks[j].Name] = &cfg.Webhooks[j].ClientConfig
		}
	}
	return out
}

func webhookKey(cfg client.Object, webhook string) string {
	return fmt.Sprintf("%T/%s/%s", cfg, cfg.GetName(), webhook)
}

// PointConversionAtWebhookProcess does for the CRDs what UseWebhookProcess does for admission:
// the API server converts through the stack's webhook process (at a local URL with envtest's
// CA). Every named CRD must have webhook conversion configured. The returned function puts the
// installed client configurations back (before a Helm upgrade of the CRDs, whose three-way merge
// would otherwise keep the URL beside the Service).
func PointConversionAtWebhookProcess(ctx context.Context, c client.Client, s *Stack, crds []string) (restore func() error, err error) {
	url := "https://" + s.WebhookAddr + "/convert"
	saved := map[string]*apiextensionsv1.WebhookClientConfig{}
	savedAnnotations := map[string]string{}
	for _, name := range crds {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return nil, err
		}
		if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter || crd.Spec.Conversion.Webhook == nil {
			return nil, fmt.Errorf("%s does not configure webhook conversion: %+v", name, crd.Spec.Conversion)
		}
		saved[name] = crd.Spec.Conversion.Webhook.ClientConfig.DeepCopy()
		crd.Spec.Conversion.Webhook.ClientConfig = &apiextensionsv1.WebhookClientConfig{
			URL: &url, CABundle: s.Mgmt.Env.WebhookInstallOptions.LocalServingCAData,
		}
		if v, ok := crd.Annotations[injectCAFrom]; ok {
			savedAnnotations[name] = v
			delete(crd.Annotations, injectCAFrom)
		}
		if err := c.Update(ctx, crd); err != nil {
			return nil, fmt.Errorf("pointing the conversion of %s at the webhook process: %w", name, err)
		}
	}
	return func() error {
		for name, cc := range saved {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return err
			}
			crd.Spec.Conversion.Webhook.ClientConfig = cc
			if v, ok := savedAnnotations[name]; ok {
				if crd.Annotations == nil {
					crd.Annotations = map[string]string{}
				}
				crd.Annotations[injectCAFrom] = v
			}
			if err := c.Update(ctx, crd); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// ExampleMachines is how many Machines ApplyExamples creates: a control-plane Machine and a
// MachineDeployment of three.
const ExampleMachines = 4

// ApplyExamples applies the product doc's examples (docs/examples/01-06: credentials, a
// v1beta1 OVirtProvider, a Cluster with its OVirtCluster, bootstrap data Secrets, a
// control-plane Machine, a MachineDeployment of three) with kubectl as the demo does, with the
// kubeconfig Secret a control-plane provider would write. The bootstrap data comes from Secrets:
// no bootstrap or control-plane provider needs to run.
func ApplyExamples(ctx context.Context, s *Stack) error {
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	vars := map[string]string{
		"OVIRT_URL": s.SimURL, "OVIRT_USERNAME": s.SimUsername, "OVIRT_PASSWORD": s.SimPassword,
		"OVIRT_CA_B64": base64.StdEncoding.EncodeToString(s.SimCAPEM),
	}
	files, err := filepath.Glob(filepath.Join(root, "docs", "examples", "0[1-6]-*.yaml"))
	if err != nil || len(files) != 6 {
		return fmt.Errorf("docs/examples: %v %w", files, err)
	}
	slices.Sort(files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", s.KubeconfigPath, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(os.Expand(string(raw), func(k string) string { return vars[k] }))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl apply -f %s: %w\n%s", filepath.Base(f), err, out)
		}
		if strings.HasSuffix(f, "03-cluster.yaml") {
			if err := s.MgmtClient().Create(ctx, KubeconfigSecret(Cluster("demo", "demo"), s.WorkloadKubeconfig)); err != nil {
				return err
			}
		}
	}
	return nil
}

// ExamplesNamespace is the namespace of the examples' cluster.
const ExamplesNamespace = "demo"

// ListCAPOV lists the objects of a CAPOV kind read in an API version (all namespaces for the
// cluster-scoped OVirtProvider, else the examples' namespace).
func ListCAPOV(ctx context.Context, c client.Client, version, kind string) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "infrastructure.cluster.x-k8s.io", Version: version, Kind: kind + "List"})
	opts := []client.ListOption{}
	if kind != "OVirtProvider" {
		opts = append(opts, client.InNamespace(ExamplesNamespace))
	}
	if err := c.List(ctx, l, opts...); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// ExamplesReady reports why the examples' provider, cluster and four machines are not Ready
// in the given version's terms with their CAPI Machines Running, or nil when they are.
func ExamplesReady(ctx context.Context, c client.Client, version string) error {
	ready := func(o unstructured.Unstructured) bool {
		if version == "v1beta1" {
			r, _, _ := unstructured.NestedBool(o.Object, "status", "ready")
			return r && conditionTrue(o, "Ready")
		}
		if o.GetKind() != "OVirtProvider" {
			p, _, _ := unstructured.NestedBool(o.Object, "status", "initialization", "provisioned")
			if !p {
				return false
			}
		}
		return conditionTrue(o, "Ready")
	}
	for _, kind := range []string{"OVirtProvider", "OVirtCluster", "OVirtMachine"} {
		items, err := ListCAPOV(ctx, c, version, kind)
		if err != nil {
			return err
		}
		if len(items) == 0 {
			return fmt.Errorf("no %s", kind)
		}
		for _, o := range items {
			if !ready(o) {
				return fmt.Errorf("%s %s is not Ready in %s: %v", kind, o.GetName(), version, o.Object["status"])
			}
			if version == "v1beta2" || kind == "OVirtProvider" {
				// Only a v1beta1 view of a contract kind carries the conversion data.
				if _, ok := o.GetAnnotations()["cluster.x-k8s.io/conversion-data"]; ok {
					return fmt.Errorf("%s %s carries conversion data in %s", kind, o.GetName(), version)
				}
			}
		}
		if kind == "OVirtMachine" && len(items) != ExampleMachines {
			return fmt.Errorf("%d OVirtMachines, want %d", len(items), ExampleMachines)
		}
	}
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ExamplesNamespace)); err != nil {
		return err
	}
	if len(machines.Items) != ExampleMachines {
		return fmt.Errorf("%d Machines, want %d", len(machines.Items), ExampleMachines)
	}
	for _, m := range machines.Items {
		if m.Status.Phase != string(clusterv1.MachinePhaseRunning) || m.Status.NodeRef.Name == "" {
			return fmt.Errorf("machine %s is %s with Node %q", m.Name, m.Status.Phase, m.Status.NodeRef.Name)
		}
	}
	return nil
}

func conditionTrue(o unstructured.Unstructured, t string) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == t {
			return m["status"] == "True"
		}
	}
	return false
}

// SpecSnapshot returns the spec of every CAPOV object of the four original kinds read in a
// version, decoded into the v1beta1 types, by kind/namespace/name. Typed, because conversion
// goes through the types: a field written with its zero value (tls.insecure: false) reads back
// as absent, which means the same.
func SpecSnapshot(ctx context.Context, c client.Client, version string) (map[string]any, error) {
	out := map[string]any{}
	for _, kind := range []string{"OVirtProvider", "OVirtCluster", "OVirtMachine", "OVirtMachineTemplate"} {
		items, err := ListCAPOV(ctx, c, version, kind)
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			var typed any
			switch kind {
			case "OVirtProvider":
				typed = &infrav1beta1.OVirtProvider{}
			case "OVirtCluster":
				typed = &infrav1beta1.OVirtCluster{}
			case "OVirtMachine":
				typed = &infrav1beta1.OVirtMachine{}
			default:
				typed = &infrav1beta1.OVirtMachineTemplate{}
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typed); err != nil {
				return nil, err
			}
			out[kind+"/"+o.GetNamespace()+"/"+o.GetName()] = reflect.ValueOf(typed).Elem().FieldByName("Spec").Interface()
		}
	}
	return out, nil
}

// VMWriteRequests counts the simulator's requests that change VMs (every method but GET on
// /vms...), by method and path.
func VMWriteRequests(sim *ovirtsim.Simulator) map[string]int {
	out := map[string]int{}
	for k, v := range sim.Requests() {
		if k.Method != "GET" && strings.HasPrefix(k.Path, "/vms") {
			out[k.Method+" "+k.Path] += v
		}
	}
	return out
}

// VMWrites is the total of VMWriteRequests.
func VMWrites(sim *ovirtsim.Simulator) int {
	n := 0
	for _, v := range VMWriteRequests(sim) {
		n += v
	}
	return n
}
