package options

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

func parse(t *testing.T, args ...string) (*Common, error) {
	t.Helper()
	c := &Common{}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.AddFlags(fs, ":8443", ":8081")
	if err := Parse(fs, args); err != nil {
		return nil, err
	}
	return c, c.Validate()
}

func TestLoggingFlags(t *testing.T) {
	tests := []struct {
		name          string
		args          []string
		wantFormat    string
		wantVerbosity uint32
		wantErr       string
	}{
		{"the default is klog text at V(0)", nil, "text", 0, ""},
		{"--logging-format selects JSON", []string{"--logging-format=json"}, "json", 0, ""},
		{"--log-format is an alias of --logging-format", []string{"--log-format=json"}, "json", 0, ""},
		{"--v sets the verbosity", []string{"--v=3"}, "text", 3, ""},
		{"--debug is V(5)", []string{"--debug=true"}, "text", DebugVerbosity, ""},
		{"a higher --v wins over --debug", []string{"--debug", "--v=7"}, "text", 7, ""},
		{"--vmodule works with text", []string{"--vmodule=machine_create=6"}, "text", 0, ""},
		{"an unknown format is refused", []string{"--logging-format=xml"}, "", 0, "Unsupported log format"},
		{"--vmodule is refused with JSON", []string{"--logging-format=json", "--vmodule=machine_create=6"}, "", 0, "Only supported for text log format"},
		{"the alpha split-stream option is refused", []string{"--log-text-split-stream"}, "", 0, "LoggingAlphaOptions is disabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := parse(t, tt.args...)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			cfg := c.LoggingConfiguration()
			g.Expect(cfg.Format).To(Equal(tt.wantFormat))
			g.Expect(uint32(cfg.Verbosity)).To(Equal(tt.wantVerbosity))
		})
	}
}

// loggingChildEnv carries the flags of the child process of TestOneLogFormatForEverything:
// logging can be applied only once per process.
const loggingChildEnv = "CAPOV_TEST_LOGGING_CHILD"

// TestLoggingChild is the child process: it applies the flags, then logs through every path a
// binary has (our logger, controller-runtime's, klog's global functions as client-go uses them,
// the feature-gate warnings) to stdout.
func TestLoggingChild(t *testing.T) {
	raw, ok := os.LookupEnv(loggingChildEnv)
	if !ok {
		t.Skip("only run by TestOneLogFormatForEverything")
	}
	c, err := parse(t, strings.Fields(raw)...)
	if err != nil {
		t.Fatal(err)
	}
	log, err := c.SetUpLogging(os.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	c.ResolveFeatureGates(log)
	log.Info("From our logger", "object", klog.KRef("ns", "name"))
	log.V(4).Info("Called oVirt at V(4)")
	log.V(6).Info("Not logged at V(6)")
	ctrl.Log.WithName("controller-runtime").Info("From controller-runtime")
	klog.InfoS("From klog, as client-go logs", "key", "value")
	klog.Infof("From klog's printf %s", "form")
	klog.Flush()
}

func TestOneLogFormatForEverything(t *testing.T) {
	tests := []struct {
		name     string
		args     string
		json     bool
		wantV4   bool
		wantText []string
	}{
		{"klog text by default", "--feature-gates=disk-magic=true", false, false,
			[]string{`] "From our logger" object="ns/name"`, `] WARNING: ignoring unknown feature gate "disk-magic"`, `] "Resolved feature gates"`}},
		{"--debug logs V(4) and V(5)", "--debug=true", false, true, nil},
		{"JSON everywhere with --logging-format=json", "--logging-format=json --feature-gates=disk-magic=true", true, false, nil},
		{"JSON everywhere with the --log-format alias and --v", "--log-format=json --v=5", true, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cmd := exec.CommandContext(context.Background(), os.Args[0], "-test.run=^TestLoggingChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), loggingChildEnv+"="+tt.args)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			g.Expect(err).NotTo(HaveOccurred(), stderr.String())

			var lines []string
			for _, l := range strings.Split(string(out), "\n") {
				// go test's own trailer
				if l == "" || l == "PASS" || strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
					continue
				}
				lines = append(lines, l)
			}
			g.Expect(len(lines)).To(BeNumerically(">=", 5))
			all := strings.Join(lines, "\n")
			for _, l := range lines {
				if tt.json {
					var entry map[string]any
					g.Expect(json.Unmarshal([]byte(l), &entry)).To(Succeed(), l)
					g.Expect(entry).To(HaveKey("msg"), l)
				} else {
					g.Expect(l).To(MatchRegexp(`^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6}\s+\d+ [^ ]+:\d+\] `), l)
				}
			}
			for _, msg := range []string{"From our logger", "From controller-runtime", "From klog, as client-go logs", "From klog's printf form", "Resolved feature gates"} {
				g.Expect(all).To(ContainSubstring(msg))
			}
			g.Expect(all).NotTo(ContainSubstring("Not logged at V(6)"))
			if tt.wantV4 {
				g.Expect(all).To(ContainSubstring("Called oVirt at V(4)"))
			} else {
				g.Expect(all).NotTo(ContainSubstring("Called oVirt at V(4)"))
			}
			for _, s := range tt.wantText {
				g.Expect(all).To(ContainSubstring(s))
			}
		})
	}
}

func TestTLSOptions(t *testing.T) {
	// httptest's certificate is RSA: the ECDHE_RSA suites apply to it.
	tests := []struct {
		name   string
		args   []string
		client *tls.Config
		works  bool
	}{
		{"TLS 1.2 is accepted by default", nil, &tls.Config{MaxVersion: tls.VersionTLS12}, true},
		{"TLS 1.1 is refused by default", nil, &tls.Config{MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11}, false},
		{"--tls-min-version=VersionTLS13 refuses TLS 1.2", []string{"--tls-min-version=VersionTLS13"}, &tls.Config{MaxVersion: tls.VersionTLS12}, false},
		{"--tls-min-version=VersionTLS13 accepts TLS 1.3", []string{"--tls-min-version=VersionTLS13"}, &tls.Config{}, true},
		{"--tls-cipher-suites accepts a listed suite", []string{"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"},
			&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}, true},
		{"--tls-cipher-suites refuses an unlisted suite", []string{"--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
			&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c, err := parse(t, tt.args...)
			g.Expect(err).NotTo(HaveOccurred())
			opts, err := c.TLSOptions()
			g.Expect(err).NotTo(HaveOccurred())
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			srv.TLS = &tls.Config{}
			for _, o := range opts {
				o(srv.TLS)
			}
			srv.StartTLS()
			defer srv.Close()

			client := tt.client.Clone()
			client.InsecureSkipVerify = true //nolint:gosec // only the handshake parameters are checked
			client.NextProtos = []string{"h2", "http/1.1"}
			conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), client)
			if !tt.works {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			g.Expect(conn.ConnectionState().NegotiatedProtocol).To(Equal("http/1.1"), "HTTP/2 stays off")
		})
	}
}

func TestTLSFlagsAreValidated(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"an unknown version", []string{"--tls-min-version=VersionTLS14"}, "--tls-min-version"},
		{"an unknown cipher suite", []string{"--tls-cipher-suites=TLS_NOPE"}, "TLS_NOPE"},
		{"an unknown curve", []string{"--tls-curve-preferences=-1"}, "--tls-curve-preferences"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.args...)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestRestConfig(t *testing.T) {
	g := NewWithT(t)
	c, err := parse(t, "--kube-api-qps=7", "--kube-api-burst=9")
	g.Expect(err).NotTo(HaveOccurred())
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
	cfg := c.RestConfig(&rest.Config{Host: "https://example.com"}, "capov-test/v1.0.0 (linux/amd64) capov/1a2b3c4", log)
	g.Expect(cfg.QPS).To(Equal(float32(7)))
	g.Expect(cfg.Burst).To(Equal(9))
	g.Expect(cfg.UserAgent).To(Equal("capov-test/v1.0.0 (linux/amd64) capov/1a2b3c4"))
	g.Expect(cfg.WarningHandler).NotTo(BeNil())

	// What the API server says for our finalizer names (no path): Cluster API drops it too.
	cfg.WarningHandler.HandleWarningHeader(299, "-", `metadata.finalizers: "capovmachine.infrastructure.cluster.x-k8s.io": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers`)
	g.Expect(logged).To(BeEmpty())
	cfg.WarningHandler.HandleWarningHeader(299, "-", "something else the operator should see")
	g.Expect(logged).To(ConsistOf(ContainSubstring("something else the operator should see")))
}

func TestMainVersionAndHelp(t *testing.T) {
	b := func() Binary {
		c := &Common{}
		return Binary{
			Name: "test", Summary: "A test binary.", Common: c,
			AddFlags: func(fs *pflag.FlagSet) { c.AddFlags(fs, ":8443", ":8081") },
			Validate: c.Validate,
			Run:      func(context.Context, *rest.Config, logr.Logger) error { return nil },
		}
	}
	g := NewWithT(t)
	var stdout, stderr bytes.Buffer
	g.Expect(Main(b(), []string{"--version"}, &stdout, &stderr)).To(Equal(0))
	g.Expect(stdout.String()).To(HavePrefix("test v0.0.0-dev (commit unknown, built unknown, go"))
	g.Expect(stderr.String()).To(BeEmpty())

	stdout.Reset()
	g.Expect(Main(b(), []string{"--help"}, &stdout, &stderr)).To(Equal(0))
	for _, flag := range []string{"--logging-format", "--log-format", "--v", "--vmodule", "--debug", "--tls-min-version", "--tls-cipher-suites", "--tls-curve-preferences", "--version"} {
		g.Expect(stdout.String()).To(ContainSubstring(flag+" "), flag)
	}
	g.Expect(stdout.String()).NotTo(ContainSubstring("--log-text-split-stream"), "alpha options are hidden")
}

func TestMetricsCertDirServesTheMountedCertificate(t *testing.T) {
	g := NewWithT(t)
	c, err := parse(t)
	g.Expect(err).NotTo(HaveOccurred())
	opts, err := c.MetricsServer()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(opts.CertDir).To(BeEmpty(), "without the flag: a self-signed certificate")

	dir := t.TempDir()
	_, err = parse(t, "--metrics-cert-dir="+dir)
	g.Expect(err).To(MatchError(And(ContainSubstring("--metrics-cert-dir "+dir), ContainSubstring("tls.crt"))), "an empty directory is refused at start")

	for _, f := range []string{"tls.crt", "tls.key"} {
		g.Expect(os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600)).To(Succeed())
	}
	c, err = parse(t, "--metrics-cert-dir="+dir)
	g.Expect(err).NotTo(HaveOccurred())
	opts, err = c.MetricsServer()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(opts.CertDir).To(Equal(dir))
	g.Expect(opts.CertName).To(Equal("tls.crt"))
	g.Expect(opts.KeyName).To(Equal("tls.key"))
	g.Expect(opts.SecureServing).To(BeTrue())
}
