package webhookload

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
)

// stubWebhook is an admission server over TLS that answers every AdmissionReview as answer
// says (by default: admitted) and counts the requests per path and per operation and kind.
type stubWebhook struct {
	*httptest.Server
	answer func(w http.ResponseWriter, review *admissionv1.AdmissionReview)
	// answered is called with the number of requests answered so far.
	answered func(n int64)
	n        atomic.Int64
	mu       sync.Mutex
	paths    map[string]int
	requests map[string]int
}

func newStubWebhook(t *testing.T) *stubWebhook {
	s := &stubWebhook{paths: map[string]int{}, requests: map[string]int{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// Refused TLS handshakes are what one test expects; the server need not log them.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *stubWebhook) serve(w http.ResponseWriter, r *http.Request) {
	review := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.paths[r.URL.Path]++
	s.requests[string(review.Request.Operation)+" "+review.Request.Kind.Kind+" "+review.Request.Namespace+"/"+review.Request.Name]++
	s.mu.Unlock()
	if s.answer != nil {
		s.answer(w, review)
	} else {
		respond(w, review, &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true})
	}
	if n := s.n.Add(1); s.answered != nil {
		s.answered(n)
	}
}

// counts returns copies of the counters (under the lock: the race detector does not see the
// network order of the handler's writes and the test's reads).
func (s *stubWebhook) counts() (paths, requests map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.paths), maps.Clone(s.requests)
}

// caPEM is the PEM of the stub's certificate, which is its own CA.
func (s *stubWebhook) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

// respond writes the review back with resp as its response, as a webhook server does.
func respond(w http.ResponseWriter, review *admissionv1.AdmissionReview, resp *admissionv1.AdmissionResponse) {
	review.Request, review.Response = nil, resp
	_ = json.NewEncoder(w).Encode(review)
}

func TestRunSendsABoundedLoadAlternatingBetweenBothWebhooks(t *testing.T) {
	g := NewWithT(t)
	s := newStubWebhook(t)
	res, err := Run(context.Background(), s.URL+"/", s.caPEM(), 3, 20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Requests).To(Equal(60))
	g.Expect(res.Errors).To(BeZero())
	g.Expect(res.P50).To(BeNumerically(">", 0))
	g.Expect(res.P99).To(BeNumerically(">=", res.P50))
	g.Expect(res.Max).To(BeNumerically(">=", res.P99))
	g.Expect(res.Elapsed).To(BeNumerically(">", 0))
	g.Expect(res.Throughput).To(BeNumerically(">", 0))
	g.Expect(res.String()).To(ContainSubstring("requests=60 errors=0"))
	paths, requests := s.counts()
	g.Expect(paths).To(Equal(map[string]int{MutateOVirtMachinePath: 30, ValidateOVirtMachinePath: 30}))
	g.Expect(requests).To(Equal(map[string]int{"CREATE OVirtMachine default/worker-load": 60}))
}

func TestRunCountsEveryAnswerThatDoesNotAdmitAsAnError(t *testing.T) {
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter, review *admissionv1.AdmissionReview)
	}{
		{"a denial", func(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
			respond(w, review, &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false})
		}},
		{"an answer for another request", func(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
			respond(w, review, &admissionv1.AdmissionResponse{UID: "another", Allowed: true})
		}},
		{"an answer without a response", func(w http.ResponseWriter, review *admissionv1.AdmissionReview) {
			respond(w, review, nil)
		}},
		{"an error status", func(w http.ResponseWriter, _ *admissionv1.AdmissionReview) {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		}},
		{"a body that is not an AdmissionReview", func(w http.ResponseWriter, _ *admissionv1.AdmissionReview) {
			_, _ = w.Write([]byte("<html>proxy error</html>"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newStubWebhook(t)
			s.answer = tc.answer
			res, err := Run(context.Background(), s.URL, s.caPEM(), 2, 5)
			g.Expect(err).NotTo(HaveOccurred(), "wrong answers are measured, not fatal")
			g.Expect(res.Requests).To(Equal(10))
			g.Expect(res.Errors).To(Equal(10))
		})
	}
}

func TestRunCountsEveryRequestToAServerTheCADoesNotVouchForAsAnError(t *testing.T) {
	g := NewWithT(t)
	s := newStubWebhook(t)
	res, err := Run(context.Background(), s.URL, otherCAPEM(t), 1, 3)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Requests).To(Equal(3))
	g.Expect(res.Errors).To(Equal(3))
	g.Expect(s.n.Load()).To(BeZero(), "no request reaches an unverified server")
}

func TestRunRefusesArgumentsThatCannotMeasureAnything(t *testing.T) {
	cases := []struct {
		name              string
		ca                []byte
		clients, requests int
		want              string
	}{
		{"no clients", nil, 0, 10, "clients (0) and requests (10) must be at least 1"},
		{"no requests", nil, 4, 0, "clients (4) and requests (0) must be at least 1"},
		{"a CA that is not PEM", []byte("not a CA"), 1, 1, "the CA PEM holds no certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Run(context.Background(), "https://127.0.0.1:1", tc.ca, tc.clients, tc.requests)
			g.Expect(err).To(MatchError(tc.want))
		})
	}
}

func TestRunStopsWhenTheContextEndsAndReturnsWhatItMeasured(t *testing.T) {
	g := NewWithT(t)
	s := newStubWebhook(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.answered = func(n int64) {
		if n == 5 {
			cancel()
		}
	}
	res, err := Run(ctx, s.URL, s.caPEM(), 1, 100)
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(err).To(MatchError(ContainSubstring("load test stopped early")))
	g.Expect(res.Requests).To(Equal(5), "the one client stops before its sixth request")

	_, err = Run(ctx, s.URL, s.caPEM(), 2, 10)
	g.Expect(err).To(MatchError("no request was sent"))
}

// otherCAPEM returns a self-signed CA certificate that has not signed the stub's certificate.
func otherCAPEM(t *testing.T) []byte {
	g := NewWithT(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	g.Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
