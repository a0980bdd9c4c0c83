package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	g.Expect(stdout.String()).To(Equal("OVIRT_URL=" + url + "\nOVIRT_USERNAME=capov@internal\nOVIRT_CA_FILE=" + caFile + "\n"))

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
