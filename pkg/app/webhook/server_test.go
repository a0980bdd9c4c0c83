package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1beta1 "github.com/capov/capov/apis/v1beta1"
	infrav1 "github.com/capov/capov/apis/v1beta2"
)

func TestStartUpLogsTheResolvedFeatureGates(t *testing.T) {
	g := NewWithT(t)
	logs := suite.logs.String()
	g.Expect(logs).To(MatchRegexp(`Resolved feature gates.*disk-add-vm-name=true,disk-clone=false,disk-keep-template-name=true`))
	g.Expect(logs).To(ContainSubstring(`WARNING: ignoring unknown feature gate "disk-magic"`))
}

func TestHealthAndReadiness(t *testing.T) {
	g := NewWithT(t)
	for _, path := range []string{"/healthz", "/readyz", "/readyz/webhook", "/readyz/informers"} {
		resp, err := http.Get("http://" + suite.healthAddr + path)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK), path)
	}
}

func TestTheServerNeedsNothingButItsRole(t *testing.T) {
	// The server runs as a user bound to config/rbac/webhook/role.yaml only. Anything else it
	// tried to read or watch (Secrets, say) would be refused and logged as the API server words
	// an RBAC refusal. (Admission refusals of the server itself, such as the deletion of an
	// OVirtProvider that machines name, are "forbidden" too, but not for a User.)
	NewWithT(t).Expect(suite.logs.String()).NotTo(ContainSubstring(`forbidden: User "` + webhookUser + `"`))
}

func TestMetricsRequireAuthorization(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second} //nolint:gosec // self-signed metrics certificate
	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+suite.metricsAddr+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := insecure.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, _ := get("")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "no token")
	code, _ = get("not-a-token")
	g.Expect(code).To(Equal(http.StatusUnauthorized), "a token the API server does not know is no credential: 401 as from the API server, not a server fault")
	g.Expect(suite.logs.String()).NotTo(ContainSubstring("Authentication failed"), "a stranger's token is not an error in our log")

	cs := kubernetes.NewForConfigOrDie(suite.env.Config)
	token := func(name string) string {
		_, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		return tr.Status.Token
	}
	code, _ = get(token("nobody"))
	g.Expect(code).To(Equal(http.StatusForbidden), "authenticated but not allowed to get /metrics")

	// A separate account for the allowed case: the server caches denials for a while.
	scraper := token("prometheus")
	_, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "capov-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "capov-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capov-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "default"}},
	}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	// RBAC changes reach the authorizer through its informers: allow a moment.
	g.Eventually(func() int { code, _ := get(scraper); return code }).WithTimeout(time.Minute).WithPolling(time.Second).Should(Equal(http.StatusOK))
	_, body := get(scraper)
	g.Expect(body).To(ContainSubstring(`controller_runtime_webhook_requests_total{code="200",webhook="/mutate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtmachine"}`))
}

// TestCertificateRotation replaces the serving certificate the way the kubelet updates a
// cert-manager Secret volume and checks that new TLS handshakes present it, without a restart,
// and that the API server keeps calling the webhook.
func TestCertificateRotation(t *testing.T) {
	g := NewWithT(t)
	serial, err := servedSerial(suite.webhookAddr, suite.ca)
	g.Expect(err).NotTo(HaveOccurred())
	next := serial + 1
	g.Expect(writeSecretVolume(suite.certDir, next, suite.ca)).To(Succeed())
	start := time.Now()
	g.Eventually(func() (int64, error) { return servedSerial(suite.webhookAddr, suite.ca) }).
		WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(next))
	t.Logf("the rotated certificate was served after %s", time.Since(start).Round(time.Millisecond))

	c, _ := newClient(t)
	bad := newMachine(uniqueName("any-prov"), func(m *infrav1.OVirtMachine) { m.Spec.ProviderID = "nope" })
	g.Expect(c.Create(context.Background(), bad)).To(MatchError(ContainSubstring("spec.providerID: Invalid value")),
		"the API server still reaches the webhook")
	good := newMachine(uniqueName("any-prov"))
	g.Expect(c.Create(context.Background(), good)).To(Succeed())
	asV1beta1 := &infrav1beta1.OVirtMachine{}
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(good), asV1beta1)).To(Succeed(),
		"the API server still reaches /convert")
	g.Expect(asV1beta1.Spec.Template).To(Equal(good.Spec.Template))
}

func TestMainFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"help prints the flags and exits 0", []string{"--help"}, 0, "--webhook-port int"},
		{"an unknown flag exits 2", []string{"--leader-elect"}, 2, "unknown flag: --leader-elect"},
		{"a port out of range exits 2", []string{"--webhook-port=70000"}, 2, "--webhook-port: 70000 is not a TCP port"},
		{"an empty cert dir exits 2", []string{"--cert-dir="}, 2, "--cert-dir must not be empty"},
		{"a stray argument exits 2", []string{"extra"}, 2, "unexpected arguments: extra"},
		{"--version prints the version and exits 0", []string{"--version"}, 0, "webhook v0.0.0-dev (commit unknown, built unknown"},
		{"an unknown logging format exits 2", []string{"--logging-format=xml"}, 2, `Unsupported log format`},
		{"the --log-format alias is checked the same way", []string{"--log-format=xml"}, 2, `Unsupported log format`},
		{"an unknown TLS version exits 2", []string{"--tls-min-version=VersionTLS99"}, 2, "--tls-min-version"},
		{"an unknown cipher suite exits 2", []string{"--tls-cipher-suites=TLS_NOPE"}, 2, "TLS_NOPE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var stdout, stderr bytes.Buffer
			g.Expect(Main(tt.args, &stdout, &stderr)).To(Equal(tt.wantCode))
			g.Expect(stdout.String() + stderr.String()).To(ContainSubstring(tt.wantOut))
		})
	}
	var stdout bytes.Buffer
	Main([]string{"--help"}, &stdout, io.Discard)
	for _, flag := range []string{"--cert-dir", "--metrics-bind-address", "--health-probe-bind-address", "--feature-gates", "--debug", "--kube-api-qps", "--kube-api-burst",
		"--logging-format", "--log-format", "--v", "--vmodule", "--tls-min-version", "--tls-cipher-suites", "--version"} {
		NewWithT(t).Expect(strings.Contains(stdout.String(), flag)).To(BeTrue(), flag)
	}
}

// TestTLSFlags: the suite runs the server with --tls-min-version=VersionTLS13. Both HTTPS
// servers refuse TLS 1.2 and never negotiate HTTP/2.
func TestTLSFlags(t *testing.T) {
	for _, addr := range map[string]string{"admission": suite.webhookAddr, "metrics": suite.metricsAddr} {
		t.Run(addr, func(t *testing.T) {
			g := NewWithT(t)
			dial := func(maxVersion uint16) (*tls.Conn, error) {
				return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{
					InsecureSkipVerify: true, //nolint:gosec // only the handshake parameters are checked
					MaxVersion:         maxVersion,
					NextProtos:         []string{"h2", "http/1.1"},
				})
			}
			_, err := dial(tls.VersionTLS12)
			g.Expect(err).To(HaveOccurred(), "TLS 1.2 is below --tls-min-version")
			conn, err := dial(tls.VersionTLS13)
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			g.Expect(conn.ConnectionState().Version).To(Equal(uint16(tls.VersionTLS13)))
			g.Expect(conn.ConnectionState().NegotiatedProtocol).NotTo(Equal("h2"), "HTTP/2 is off")
		})
	}
}

// TestLogsAreKlogText: the server logs through component-base's klog text format, and so do
// controller-runtime and client-go (one format in the whole log).
func TestLogsAreKlogText(t *testing.T) {
	g := NewWithT(t)
	klogLine := regexp.MustCompile(`^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6}\s+\d+ [^ ]+:\d+\] `)
	// What every start logs, whatever ran before this test (a count of lines depended on the
	// other tests' timing and failed on a loaded machine): the server's own line, and one per
	// endpoint it serves, the metrics one from controller-runtime's server.
	for _, want := range []string{`"Starting the CAPOV webhook server"`, `endpoint="health"`, `endpoint="webhook"`, `endpoint="metrics"`} {
		g.Eventually(suite.logs.String).WithTimeout(30*time.Second).Should(ContainSubstring(want), "the log has no line with %s", want)
	}
	lines := strings.Split(strings.TrimSpace(suite.logs.String()), "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, " >") || l == "" {
			continue // continuation of a multi-line value
		}
		g.Expect(l).To(MatchRegexp(klogLine.String()))
	}
}
