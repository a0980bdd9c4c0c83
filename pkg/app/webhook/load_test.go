package webhook

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestLoad is the bounded loopback load test of the admission server: CAPOV_WEBHOOK_LOAD=1
// enables it (about 10 s on two cores, with the envtest start), CAPOV_WEBHOOK_LOAD_CLIENTS and
// CAPOV_WEBHOOK_LOAD_REQUESTS size it (default 8 clients x 5000 requests each). It posts
// AdmissionReviews straight to the TLS endpoint of the server TestMain runs, so the numbers are
// those of the webhook alone, not of the API server in front of it. See docs/benchmarks.md.
func TestLoad(t *testing.T) {
	if os.Getenv("CAPOV_WEBHOOK_LOAD") == "" {
		t.Skip("set CAPOV_WEBHOOK_LOAD=1 to run the admission load test")
	}
	g := NewWithT(t)
	clients, requests := envInt("CAPOV_WEBHOOK_LOAD_CLIENTS", 8), envInt("CAPOV_WEBHOOK_LOAD_REQUESTS", 5000)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// Warm up connections and the code paths before measuring.
	_, err := LoadTest(ctx, "https://"+suite.webhookAddr, suite.ca.pem, clients, 50)
	g.Expect(err).NotTo(HaveOccurred())

	res, err := LoadTest(ctx, "https://"+suite.webhookAddr, suite.ca.pem, clients, requests)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("admission load test, %d clients x %d requests: %s", clients, requests, res)
	g.Expect(res.Errors).To(BeZero())
	g.Expect(res.Requests).To(Equal(clients * requests))
	if os.Getenv("CAPOV_WEBHOOK_LOAD_STRICT") != "" {
		g.Expect(res.P99).To(BeNumerically("<=", 5*time.Millisecond), "target: p99 <= 5 ms")
	}
}

func TestLoadTestIsBoundedAndChecksAnswers(t *testing.T) {
	g := NewWithT(t)
	res, err := LoadTest(context.Background(), "https://"+suite.webhookAddr, suite.ca.pem, 2, 20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Requests).To(Equal(40))
	g.Expect(res.Errors).To(BeZero())
	g.Expect(res.P50).To(BeNumerically(">", 0))
	g.Expect(res.P99).To(BeNumerically(">=", res.P50))
	g.Expect(res.Throughput).To(BeNumerically(">", 0))

	_, err = LoadTest(context.Background(), "https://"+suite.webhookAddr, []byte("not a CA"), 1, 1)
	g.Expect(err).To(MatchError(ContainSubstring("holds no certificate")))

	other, err := newTestCA()
	g.Expect(err).NotTo(HaveOccurred())
	res, err = LoadTest(context.Background(), "https://"+suite.webhookAddr, other.pem, 1, 3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Errors).To(Equal(3), "a server the CA does not vouch for is an error per request")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
