package webhookload

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	appwebhook "github.com/capov/capov/pkg/app/webhook"
	"github.com/capov/capov/pkg/webhooks/conversion"
)

// conversionServer serves /convert over TLS with controller-runtime's conversion handler, the
// webhook binary's scheme and CAPOV's converters: the code the binary runs at /convert, without
// the API server it needs for admission.
func conversionServer(t *testing.T) (url string, caPEM []byte) {
	t.Helper()
	g := NewWithT(t)
	scheme := appwebhook.NewScheme()
	registry := ctrlconversion.NewRegistry()
	for hub, newConverter := range map[string]func() func(*runtime.Scheme) (ctrlconversion.Converter, error){
		"OVirtMachine": conversion.OVirtMachineConverter, "OVirtCluster": conversion.OVirtClusterConverter,
		"OVirtMachineTemplate": conversion.OVirtMachineTemplateConverter, "OVirtProvider": conversion.OVirtProviderConverter,
	} {
		c, err := newConverter()(scheme)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(registry.RegisterConverter(infrav1.GroupVersion.WithKind(hub).GroupKind(), c)).To(Succeed())
	}
	mux := http.NewServeMux()
	mux.Handle(ConvertPath, ctrlconversion.NewWebhookHandler(scheme, registry))
	s := httptest.NewTLSServer(mux)
	t.Cleanup(s.Close)
	return s.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// TestRunConversionConvertsEveryObjectBothWays keeps the conversion mode working with a few
// requests. With CAPOV_CONVERSION_LOAD_REQUESTS=<n> (and CAPOV_CONVERSION_LOAD_CLIENTS, default
// 4) it is the conversion load test: it logs p50/p99 and throughput per direction and batch.
func TestRunConversionConvertsEveryObjectBothWays(t *testing.T) {
	clients, requests := 2, 5
	if n, err := strconv.Atoi(os.Getenv("CAPOV_CONVERSION_LOAD_REQUESTS")); err == nil && n > 0 {
		clients, requests = 4, n
		if c, err := strconv.Atoi(os.Getenv("CAPOV_CONVERSION_LOAD_CLIENTS")); err == nil && c > 0 {
			clients = c
		}
	}
	url, ca := conversionServer(t)
	for _, dir := range []Direction{ToV1Beta2, ToV1Beta1} {
		for _, batch := range []int{1, 100} {
			t.Run(string(dir)+" batch "+strconv.Itoa(batch), func(t *testing.T) {
				g := NewWithT(t)
				// Warm-up: connections and the converters' first allocations.
				_, err := RunConversion(context.Background(), url, ca, dir, clients, 2, batch)
				g.Expect(err).NotTo(HaveOccurred())
				res, err := RunConversion(context.Background(), url, ca, dir, clients, requests, batch)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Requests).To(Equal(clients * requests))
				g.Expect(res.Errors).To(BeZero(), "every object converted to the desired version")
				g.Expect(res.P99).To(BeNumerically(">=", res.P50))
				t.Logf("conversion %s batch=%d clients=%d: %s objects/s=%.0f", dir, batch, clients, res, res.Throughput*float64(batch))
			})
		}
	}
}

func TestRunConversionCountsAnswersThatDoNotConvertAsErrors(t *testing.T) {
	g := NewWithT(t)
	s := newStubWebhook(t) // answers with AdmissionReviews, not conversions
	res, err := RunConversion(context.Background(), s.URL, s.caPEM(), ToV1Beta1, 1, 3, 2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Requests).To(Equal(3))
	g.Expect(res.Errors).To(Equal(3))

	_, err = RunConversion(context.Background(), s.URL, s.caPEM(), ToV1Beta1, 1, 1, 0)
	g.Expect(err).To(MatchError("clients (1), requests (1) and batch (0) must be at least 1"))
}
