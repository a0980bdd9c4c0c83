package webhook

// The tests of this package are integration tests of the real webhook server: TestMain starts
// a kube-apiserver and etcd (envtest) with the CAPOV CRDs and the webhook configurations
// generated into config/webhook, and runs Run() with a serving certificate from its own CA in a
// kubelet-style Secret volume, as the user the generated RBAC (config/rbac/webhook) grants. The
// API server then calls the server over TLS for every OVirt* write the tests make.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/capov/capov/pkg/app/options"
	"github.com/capov/capov/test/envtest"
)

// webhookUser is the identity the server runs as; it gets exactly config/rbac/webhook/role.yaml.
const webhookUser = "capov-webhook"

// suite is what TestMain started.
var suite struct {
	env         *envtest.Environment
	ca          *testCA
	certDir     string
	webhookAddr string // 127.0.0.1:<port> of the admission server
	metricsAddr string
	healthAddr  string
	logs        *syncBuffer
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	if err := startSuite(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "webhook suite: %v\n%s", err, suite.logs)
		stopSuite()
		return 1
	}
	code := m.Run()
	if code != 0 || os.Getenv("CAPOV_TEST_LOG") != "" {
		fmt.Fprintf(os.Stderr, "--- webhook server log ---\n%s", suite.logs)
	}
	stopSuite()
	return code
}

var stopServer func() error

func startSuite(ctx context.Context) error {
	suite.logs = &syncBuffer{}
	root, err := envtest.RepoRoot()
	if err != nil {
		return err
	}
	if suite.ca, err = newTestCA(); err != nil {
		return err
	}
	if suite.certDir, err = os.MkdirTemp("", "capov-webhook-certs-"); err != nil {
		return err
	}
	if err := writeSecretVolume(suite.certDir, 1, suite.ca); err != nil {
		return err
	}
	// The Cluster API CRDs are installed too: only the CAPOV CRDs may convert through this
	// server (TestOnlyOurCRDsConvertThroughTheWebhook).
	// The admission and health endpoints are listeners this process holds and hands to Run; the
	// metrics endpoint binds port 0 and its "Serving" log line reports the address.
	admissionLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	healthLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	suite.env, err = envtest.Start(ctx, envtest.Options{
		Webhooks: crenvtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
			LocalServingHost: "127.0.0.1",
			LocalServingPort: admissionLn.Addr().(*net.TCPAddr).Port,
		},
	})
	if err != nil {
		return err
	}
	// envtest generated its own CA for the webhook configurations; the server uses ours (it
	// rotates certificates in TestCertificateRotation), so the API server must trust ours.
	if err := trustCA(ctx, suite.env.Client, suite.ca.pem); err != nil {
		return err
	}
	if err := suite.env.SetConversionCABundle(ctx, suite.ca.pem); err != nil {
		return err
	}
	cfg, err := webhookIdentity(ctx, root)
	if err != nil {
		return err
	}

	suite.webhookAddr = admissionLn.Addr().String()
	suite.healthAddr = healthLn.Addr().String()
	opts := NewOptions()
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	opts.AddFlags(fs)
	args := []string{
		"--webhook-port=" + strings.TrimPrefix(suite.webhookAddr, "127.0.0.1:"),
		"--cert-dir=" + suite.certDir,
		"--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=" + suite.healthAddr,
		// disk-clone stays off (its default); the unknown gate must be logged and ignored.
		"--feature-gates=disk-add-vm-name=true,disk-magic=true",
		// TestTLSFlags checks that both servers refuse TLS 1.2.
		"--tls-min-version=VersionTLS13",
		// Debug logs every admission request. The admission load test, which measures the
		// production level, is the benchmark's (test/webhookload, make bench).
		"--debug",
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := opts.Validate(); err != nil {
		return err
	}
	opts.Listeners = options.NewListeners(map[string]net.Listener{options.ListenerWebhook: admissionLn, options.ListenerHealth: healthLn})
	var sink io.Writer = suite.logs
	if os.Getenv("CAPOV_TEST_LOG") == "stream" {
		sink = io.MultiWriter(suite.logs, os.Stderr)
	}
	log, err := opts.SetUpLogging(sink)
	if err != nil {
		return err
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, opts, cfg, log) }()
	stopServer = func() error {
		stop()
		select {
		case err := <-done:
			return err
		case <-time.After(90 * time.Second):
			return errors.New("the webhook server did not stop within 90s")
		}
	}
	if err := waitReady(ctx, done); err != nil {
		return err
	}
	suite.metricsAddr, err = reportedMetricsAddr(suite.logs)
	return err
}

// reportedMetricsAddr waits (at most 30 s) for the metrics address that the server's "Serving"
// log line reports.
func reportedMetricsAddr(logs *syncBuffer) (string, error) {
	line := regexp.MustCompile(`"Serving".*endpoint="metrics" address="([^"]+)"`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := line.FindStringSubmatch(logs.String()); m != nil {
			return m[1], nil
		}
	}
	return "", errors.New("the webhook server logged no metrics address within 30s")
}

func stopSuite() {
	if stopServer != nil {
		if err := stopServer(); err != nil {
			fmt.Fprintf(os.Stderr, "webhook suite: stopping the server: %v\n", err)
		}
	}
	if err := suite.env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "webhook suite: stopping envtest: %v\n", err)
	}
	if suite.certDir != "" {
		_ = os.RemoveAll(suite.certDir)
	}
}

// waitReady polls /readyz until the server reports ready, or Run fails.
func waitReady(ctx context.Context, done <-chan error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			return fmt.Errorf("the webhook server stopped during start-up: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get("http://" + suite.healthAddr + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
	return errors.New("the webhook server did not become ready within 2 minutes")
}

// trustCA puts caPEM into every webhook of the installed configurations, as cert-manager's
// CA injector does in a cluster.
func trustCA(ctx context.Context, c client.Client, caPEM []byte) error {
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.List(ctx, mutating); err != nil {
		return err
	}
	for i := range mutating.Items {
		for j := range mutating.Items[i].Webhooks {
			mutating.Items[i].Webhooks[j].ClientConfig.CABundle = caPEM
		}
		if err := c.Update(ctx, &mutating.Items[i]); err != nil {
			return err
		}
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, validating); err != nil {
		return err
	}
	for i := range validating.Items {
		for j := range validating.Items[i].Webhooks {
			validating.Items[i].Webhooks[j].ClientConfig.CABundle = caPEM
		}
		if err := c.Update(ctx, &validating.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// webhookIdentity creates the user the server runs as and binds it to the generated ClusterRole
// only, so that the tests prove the RBAC is sufficient (and that nothing else, such as Secrets,
// is read: that would be refused and logged).
func webhookIdentity(ctx context.Context, root string) (*rest.Config, error) {
	raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", "webhook", "role.yaml"))
	if err != nil {
		return nil, err
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		return nil, fmt.Errorf("decoding config/rbac/webhook/role.yaml: %w", err)
	}
	if err := suite.env.Client.Create(ctx, role); err != nil {
		return nil, err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: webhookUser}},
	}
	if err := suite.env.Client.Create(ctx, binding); err != nil {
		return nil, err
	}
	user, err := suite.env.Env.AddUser(crenvtest.User{Name: webhookUser}, suite.env.Config)
	if err != nil {
		return nil, err
	}
	return user.Config(), nil
}
