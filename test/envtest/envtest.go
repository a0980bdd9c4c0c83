// Package envtest starts a real kube-apiserver and etcd (controller-runtime envtest) with the
// CAPOV CRDs, the Cluster API core CRDs and, on request, the cert-manager CRDs, and hands tests
// a client. The binaries come from hack/envtest-assets.sh, which builds them from Go modules
// (they cannot be downloaded here) and caches them in bin/.
//
// Typical use from TestMain:
//
//	func TestMain(m *testing.M) {
//		os.Exit(envtest.Run(m, envtest.Options{}, func(e *envtest.Environment) { env = e }))
//	}
package envtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	addonsv1 "sigs.k8s.io/cluster-api/api/addons/v1beta2"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1beta1 "sigs.k8s.io/cluster-api/api/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// Module paths whose CRD files the harness loads.
const (
	capiModule        = "sigs.k8s.io/cluster-api"
	certManagerModule = "github.com/cert-manager/cert-manager"
)

// Options select what the control plane is started with.
type Options struct {
	// WithoutCAPICRDs skips the Cluster API core CRDs.
	WithoutCAPICRDs bool
	// WithoutOurCRDs skips the CAPOV CRDs (for example to test a Helm install of them).
	WithoutOurCRDs bool
	// WithKubeadmCRDs also loads the CRDs of Cluster API's kubeadm bootstrap and control-plane
	// providers (KubeadmConfig, KubeadmControlPlane and their templates).
	WithKubeadmCRDs bool
	// WithCertManagerCRDs loads the cert-manager CRDs from its Go module.
	WithCertManagerCRDs bool
	// ExtraCRDPaths are more directories or files with CRDs.
	ExtraCRDPaths []string
	// Webhooks configures admission webhooks the API server should call (see
	// controller-runtime envtest.WebhookInstallOptions).
	Webhooks crenvtest.WebhookInstallOptions
	// AttachOutput streams the API server and etcd output to the test output.
	AttachOutput bool
	// AuditLogPath, when set, makes the API server write an audit log there: one JSON line
	// per write (create, update, patch, delete) to OVirtMachines, Machines and
	// IPAddressClaims, naming who did it (user, user agent) and the answer (AuditEvents reads
	// it back). A suite that finds an object gone or changed can then tell who did it.
	AuditLogPath string
}

// auditPolicy records writes to the objects whose life the suites follow, and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: infrastructure.cluster.x-k8s.io
    resources: ["ovirtmachines", "ovirtmachines/status"]
  - group: cluster.x-k8s.io
    resources: ["machines"]
  - group: ipam.cluster.x-k8s.io
    resources: ["ipaddressclaims", "ipaddresses"]
- level: None
`

// Environment is a running control plane.
type Environment struct {
	// Env is the underlying controller-runtime environment.
	Env *crenvtest.Environment
	// Config reaches the API server as an admin.
	Config *rest.Config
	// Client is an uncached client with Scheme.
	Client client.Client
	// Scheme knows core Kubernetes, Cluster API and CAPOV types.
	Scheme *runtime.Scheme
}

// NewScheme returns a scheme with the Kubernetes, Cluster API (v1beta2 and v1beta1) and CAPOV
// types the tests use.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(bootstrapv1.AddToScheme(s))
	utilruntime.Must(controlplanev1.AddToScheme(s))
	utilruntime.Must(addonsv1.AddToScheme(s))
	utilruntime.Must(ipamv1.AddToScheme(s))
	utilruntime.Must(clusterv1beta1.AddToScheme(s))
	utilruntime.Must(infrav1beta1.AddToScheme(s))
	utilruntime.Must(infrav1.AddToScheme(s))
	return s
}

// Start starts kube-apiserver and etcd and installs the CRDs.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	assets, err := EnsureAssets(ctx)
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	var paths []string
	var kubeadmCRDs []*apiextensionsv1.CustomResourceDefinition
	ourCRDs := filepath.Join(root, "config", "crd", "bases")
	// With webhooks, our CRDs are installed after the start (installOurCRDs) with their
	// conversion pointing at the local webhook server: envtest itself would drop it, because
	// our types convert through converters, not the Convertible interface, and its
	// IgnoreSchemeConvertible would redirect the Cluster API CRDs too.
	withWebhooks := webhooksRequested(opts.Webhooks)
	if !opts.WithoutOurCRDs && !withWebhooks {
		paths = append(paths, ourCRDs)
	}
	if !opts.WithoutCAPICRDs {
		dir, err := ModuleDir(ctx, capiModule)
		if err != nil {
			return nil, err
		}
		paths = append(paths, filepath.Join(dir, "core", "config", "crd", "bases"))
		if opts.WithKubeadmCRDs {
			if kubeadmCRDs, err = contractLabelled(filepath.Join(dir, "bootstrap", "kubeadm", "config", "crd", "bases"),
				filepath.Join(dir, "controlplane", "kubeadm", "config", "crd", "bases")); err != nil {
				return nil, err
			}
		}
	}
	if opts.WithCertManagerCRDs {
		dir, err := ModuleDir(ctx, certManagerModule)
		if err != nil {
			return nil, err
		}
		paths = append(paths, filepath.Join(dir, "deploy", "crds"))
	}
	paths = append(paths, opts.ExtraCRDPaths...)

	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		// 20 s, the default, is tight on two loaded cores.
		_ = os.Setenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "90s")
	}
	scheme := NewScheme()
	env := &crenvtest.Environment{
		Scheme:                   scheme,
		BinaryAssetsDirectory:    assets,
		CRDDirectoryPaths:        paths,
		CRDs:                     kubeadmCRDs,
		ErrorIfCRDPathMissing:    true,
		WebhookInstallOptions:    opts.Webhooks,
		AttachControlPlaneOutput: opts.AttachOutput,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	if opts.AuditLogPath != "" {
		policy := opts.AuditLogPath + ".policy.yaml"
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return nil, fmt.Errorf("writing the audit policy: %w", err)
		}
		env.ControlPlane.GetAPIServer().Configure().
			Set("audit-policy-file", policy).
			Set("audit-log-path", opts.AuditLogPath).
			Set("audit-log-format", "json").
			Set("audit-log-mode", "blocking")
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest control plane (assets in %s): %w", assets, err)
	}
	if !opts.WithoutOurCRDs && withWebhooks {
		if err := installOurCRDs(cfg, ourCRDs, &env.WebhookInstallOptions); err != nil {
			_ = env.Stop()
			return nil, err
		}
	}
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Environment{Env: env, Config: cfg, Client: c, Scheme: scheme}, nil
}

// contractLabelled reads the CRDs in dirs and labels them with the Cluster API contracts their
// versions implement, as the providers' release manifests do (their kustomizations add the
// labels, the CRD bases lack them); Cluster API refuses to follow references to a CRD without.
func contractLabelled(dirs ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	o := crenvtest.CRDInstallOptions{Paths: dirs, ErrorIfPathMissing: true}
	if err := crenvtest.ReadCRDFiles(&o); err != nil {
		return nil, fmt.Errorf("reading CRDs in %v: %w", dirs, err)
	}
	for _, crd := range o.CRDs {
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1beta1" || v.Name == "v1beta2" {
				crd.Labels["cluster.x-k8s.io/"+v.Name] = v.Name
			}
		}
	}
	return o.CRDs, nil
}

// webhooksRequested reports whether the options install webhook configurations, that is
// whether the test runs a webhook server on the local serving port.
func webhooksRequested(o crenvtest.WebhookInstallOptions) bool {
	return len(o.Paths) > 0 || len(o.MutatingWebhooks) > 0 || len(o.ValidatingWebhooks) > 0
}

// ConversionURL is where the API server sends the ConversionReviews of the CAPOV CRDs when the
// environment was started with webhooks: /convert of the local webhook server.
func ConversionURL(o *crenvtest.WebhookInstallOptions) string {
	return "https://" + net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort)) + "/convert"
}

// installOurCRDs installs the CAPOV CRDs (group infrastructure.cluster.x-k8s.io only) with
// spec.conversion calling the local webhook server with envtest's CA, as the Helm chart and
// config/ make them call the webhook Service in a cluster.
func installOurCRDs(cfg *rest.Config, dir string, wh *crenvtest.WebhookInstallOptions) error {
	crdOpts := crenvtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}
	if err := crenvtest.ReadCRDFiles(&crdOpts); err != nil {
		return fmt.Errorf("reading the CAPOV CRDs: %w", err)
	}
	url := ConversionURL(wh)
	for _, crd := range crdOpts.CRDs {
		if crd.Spec.Group != infrav1.GroupVersion.Group {
			return fmt.Errorf("%s is not a CAPOV CRD (group %s); only CAPOV CRDs are redirected to the local webhook", crd.Name, crd.Spec.Group)
		}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ConversionReviewVersions: []string{"v1"},
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: wh.LocalServingCAData},
			},
		}
	}
	// WebhookOptions stays empty: envtest must not rewrite (or drop) the conversion set here.
	if _, err := crenvtest.InstallCRDs(cfg, crenvtest.CRDInstallOptions{CRDs: crdOpts.CRDs, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("installing the CAPOV CRDs with conversion at %s: %w", url, err)
	}
	return nil
}

// SetConversionCABundle makes the API server trust caPEM for the conversion webhook of every
// CAPOV CRD, as cert-manager's CA injector does in a cluster (for tests whose webhook server
// serves a certificate of their own CA instead of envtest's).
func (e *Environment) SetConversionCABundle(ctx context.Context, caPEM []byte) error {
	list := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := e.Client.List(ctx, list); err != nil {
		return err
	}
	for i := range list.Items {
		crd := &list.Items[i]
		if crd.Spec.Group != infrav1.GroupVersion.Group || crd.Spec.Conversion == nil || crd.Spec.Conversion.Webhook == nil ||
			crd.Spec.Conversion.Webhook.ClientConfig == nil {
			continue
		}
		crd.Spec.Conversion.Webhook.ClientConfig.CABundle = caPEM
		if err := e.Client.Update(ctx, crd); err != nil {
			return fmt.Errorf("setting the conversion CA of %s: %w", crd.Name, err)
		}
	}
	return nil
}

// Stop stops the control plane.
func (e *Environment) Stop() error {
	if e == nil || e.Env == nil {
		return nil
	}
	return e.Env.Stop()
}

// Kubeconfig renders a kubeconfig for the admin user of the environment.
func (e *Environment) Kubeconfig(clusterName string) ([]byte, error) {
	return KubeconfigFor(e.Config, clusterName)
}

// KubeconfigFor renders a kubeconfig for a rest.Config with client certificates.
func KubeconfigFor(cfg *rest.Config, clusterName string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[clusterName] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	kc.AuthInfos[clusterName+"-admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	kc.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: clusterName + "-admin"}
	kc.CurrentContext = clusterName
	out, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, fmt.Errorf("rendering kubeconfig: %w", err)
	}
	return out, nil
}

// Run starts an environment, calls setup with it, runs the tests and stops it. It returns the
// exit code for os.Exit. A failure to start is fatal: every test of the package needs it.
func Run(m *testing.M, opts Options, setup func(*Environment)) int {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	env, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "envtest: %v\n", err)
		return 1
	}
	if setup != nil {
		setup(env)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "envtest: stopping: %v\n", err)
	}
	return code
}

// RepoRoot returns the repository root: the nearest directory above the working directory that
// holds go.work.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root not found: no go.work above the working directory")
		}
		dir = parent
	}
}

// InstallCAPICRDs installs Cluster API core's CRDs (Cluster, Machine, ...) into a running API
// server, as `clusterctl init` does, for tests that start without them (WithoutCAPICRDs).
func InstallCAPICRDs(ctx context.Context, cfg *rest.Config) error {
	dir, err := ModuleDir(ctx, capiModule)
	if err != nil {
		return err
	}
	_, err = crenvtest.InstallCRDs(cfg, crenvtest.CRDInstallOptions{
		Paths: []string{filepath.Join(dir, "core", "config", "crd", "bases")}, ErrorIfPathMissing: true,
	})
	if err != nil {
		return fmt.Errorf("installing Cluster API's CRDs: %w", err)
	}
	return nil
}

// ModuleDir returns the directory of a module of the build list (downloading it if needed).
func ModuleDir(ctx context.Context, module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w: %s", module, err, stderr.String())
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not downloaded; run go mod download %s", module, module)
	}
	return dir, nil
}

// EnsureAssets returns a directory with the kube-apiserver and etcd binaries: KUBEBUILDER_ASSETS
// when it holds them, else the output of hack/envtest-assets.sh (which builds them once).
func EnsureAssets(ctx context.Context) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if isExec(filepath.Join(dir, "kube-apiserver")) && isExec(filepath.Join(dir, "etcd")) {
			return dir, nil
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "envtest-assets.sh"))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building envtest assets with hack/envtest-assets.sh: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	_ = os.Setenv("KUBEBUILDER_ASSETS", dir)
	return dir, nil
}

func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// AuditEvent is one write the API server's audit log recorded (Options.AuditLogPath).
type AuditEvent struct {
	Time      time.Time
	Verb      string
	Resource  string // resource[/subresource]
	Namespace string
	Name      string
	User      string
	UserAgent string
	Code      int32
}

func (e AuditEvent) String() string {
	return fmt.Sprintf("%s %s %s %s/%s by %s (%s): %d", e.Time.UTC().Format("15:04:05.000000"), e.Verb, e.Resource,
		e.Namespace, e.Name, e.User, e.UserAgent, e.Code)
}

// AuditEvents reads the audit log at path and returns the writes that match (nil: all), in
// the order they were logged.
func AuditEvents(path string, match func(AuditEvent) bool) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var raw struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			User      struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
				Name        string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus struct {
				Code int32 `json:"code"`
			} `json:"responseStatus"`
			StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
		}
		if json.Unmarshal(sc.Bytes(), &raw) != nil {
			continue
		}
		e := AuditEvent{Time: raw.StageTimestamp.Time, Verb: raw.Verb, Resource: raw.ObjectRef.Resource, Namespace: raw.ObjectRef.Namespace,
			Name: raw.ObjectRef.Name, User: raw.User.Username, UserAgent: raw.UserAgent, Code: raw.ResponseStatus.Code}
		if raw.ObjectRef.Subresource != "" {
			e.Resource += "/" + raw.ObjectRef.Subresource
		}
		if match == nil || match(e) {
			out = append(out, e)
		}
	}
	return out, sc.Err()
}
