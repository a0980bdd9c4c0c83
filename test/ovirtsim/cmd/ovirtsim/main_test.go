package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/test/ovirtsim"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesUntilCancelled(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	seed := ovirtsim.DemoSeed()
	seed.Templates = seed.Templates[:1]
	b, err := json.Marshal(seed)
	g.Expect(err).NotTo(HaveOccurred())
	seedPath, urlFile, caFile := filepath.Join(dir, "seed.json"), filepath.Join(dir, "url"), filepath.Join(dir, "ca.pem")
	g.Expect(os.WriteFile(seedPath, b, 0o600)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--listen", "127.0.0.1:0", "--seed", seedPath, "--url-file", urlFile, "--ca-out", caFile,
			"--username", "capov@internal", "--password", "pw", "--token-ttl", "1m", "--random-seed", "9",
			"--latency", "1ms-2ms", "--fault", "POST:/vms:500:1:1", "--image-lock", "1h", "--boot-delay", "100ms",
			"--no-guest-agent",
		}, &stdout, &stderr)
	}()
	var url string
	g.Eventually(func() string {
		b, _ := os.ReadFile(urlFile)
		url = strings.TrimSpace(string(b))
		return url
	}).WithTimeout(10 * time.Second).Should(HavePrefix("https://127.0.0.1:"))
	g.Expect(stdout.String()).To(Equal("OVIRT_URL=" + url + "\nOVIRT_USERNAME=capov@internal\nOVIRT_CA_FILE=" + caFile +
		"\nOVIRT_CA_URL=" + strings.TrimSuffix(url, "/api") + "/services/pki-resource?resource=ca-certificate&format=X509-PEM-CA\n"))

	conn, err := ovirtsdk.NewConnectionBuilder().URL(url).Username("capov@internal").Password("pw").CAFile(caFile).Build()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(conn.Test()).To(Succeed())
	r, err := conn.SystemService().TemplatesService().List().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.MustTemplates().Slice()).To(HaveLen(2), "Blank and the one template of the seed file")
	vm := ovirtsdk.NewVmBuilder().Name("cli").ClusterBuilder(ovirtsdk.NewClusterBuilder().Name("Default")).
		TemplateBuilder(ovirtsdk.NewTemplateBuilder().Name("rhcos-4.14")).MustBuild()
	_, err = conn.SystemService().VmsService().Add().Vm(vm).Send()
	g.Expect(err).To(MatchError(ContainSubstring(`"500"`)), "the --fault fires once")
	res, err := conn.SystemService().VmsService().Add().Vm(vm).Send()
	g.Expect(err).NotTo(HaveOccurred())
	got, err := conn.SystemService().VmsService().VmService(res.MustVm().MustId()).Get().Send()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.MustVm().MustStatus()).To(Equal(ovirtsdk.VMSTATUS_IMAGE_LOCKED), "--image-lock")

	cancel()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	_, err = os.Stat(urlFile)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the URL file is removed on exit")
	_, err = os.Stat(caFile)
	g.Expect(err).NotTo(HaveOccurred(), "an explicit --ca-out is kept")
}

// TestRunServesOnAReadOnlyRoot: in a pod with readOnlyRootFilesystem and no /tmp volume the
// simulator cannot write its CA file; it serves anyway, and the CA comes from OVIRT_CA_URL as
// from an Engine. An explicit --ca-out that cannot be written is still an error.
func TestRunServesOnAReadOnlyRoot(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "does-not-exist"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"--listen", "127.0.0.1:0"}, &stdout, &stderr) }()
	g.Eventually(stdout.String).WithTimeout(10 * time.Second).Should(ContainSubstring("OVIRT_CA_URL="))
	g.Expect(stdout.String()).NotTo(ContainSubstring("OVIRT_CA_FILE"))
	g.Expect(stderr.String()).To(ContainSubstring("ovirtsim: no CA file"))
	var caURL string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if v, ok := strings.CutPrefix(l, "OVIRT_CA_URL="); ok {
			caURL = v
		}
	}
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // fetching the CA to trust, as curl -k does
	resp, err := insecure.Get(caURL)
	g.Expect(err).NotTo(HaveOccurred())
	pem, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(string(pem)).To(HavePrefix("-----BEGIN CERTIFICATE-----"))
	cancel()
	g.Eventually(done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))

	err = run(context.Background(), []string{"--listen", "127.0.0.1:0", "--ca-out", filepath.Join(t.TempDir(), "no", "such", "ca.pem")}, io.Discard, io.Discard)
	g.Expect(err).To(MatchError(ContainSubstring("writing the CA file")))
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--fault", "POST:/vms"},
		{"--latency", "fast"},
		{"--seed", "/does/not/exist.json"},
		{"--listen", "nonsense"},
		{"--nope"},
		{"extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			g := NewWithT(t)
			var out, errOut syncBuffer
			err := run(context.Background(), append([]string{"--listen", "127.0.0.1:0"}, args...), &out, &errOut)
			g.Expect(err).To(HaveOccurred())
			g.Expect(out.String()).To(BeEmpty())
		})
	}
}
