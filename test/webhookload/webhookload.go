// Package webhookload is the admission and conversion load generator of the benchmark
// (test/bench): it drives a running CAPOV webhook server the way the API server does, over TLS
// with keep-alive, with a bounded closed-loop load, and checks every answer. Run sends
// AdmissionReviews, RunConversion ConversionReviews to /convert. It is test code: the product
// binaries do not link it.
package webhookload

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/test/percentile"
)

// Paths of the OVirtMachine webhooks, as controller-runtime's builder registers them.
const (
	// MutateOVirtMachinePath is the defaulting webhook of OVirtMachine.
	MutateOVirtMachinePath = "/mutate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtmachine"
	// ValidateOVirtMachinePath is the validating webhook of OVirtMachine.
	ValidateOVirtMachinePath = "/validate-infrastructure-cluster-x-k8s-io-v1beta2-ovirtmachine"
)

// Result summarises a Run.
type Result struct {
	// Requests is the number of requests sent.
	Requests int
	// Errors counts transport errors, non-200 answers and answers that do not admit the object.
	Errors int
	// P50, P99 and Max are latencies of the requests, from sending to reading the whole answer
	// (nearest-rank percentiles).
	P50, P99, Max time.Duration
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration
	// Throughput is requests per second over Elapsed.
	Throughput float64
}

// String renders the result on one line.
func (r Result) String() string {
	return fmt.Sprintf("requests=%d errors=%d p50=%s p99=%s max=%s elapsed=%s throughput=%.0f req/s",
		r.Requests, r.Errors, r.P50, r.P99, r.Max, r.Elapsed.Round(time.Millisecond), r.Throughput)
}

// Run drives a running webhook server at baseURL (https://host:port) the way the API server
// does: clients concurrent connections each send requests AdmissionReviews, one after the other,
// alternating between the OVirtMachine defaulting and validating webhooks with the create of a
// valid OVirtMachine. caPEM verifies the serving certificate. The load is bounded
// (clients x requests), so the run is safe against a shared server.
//
// The machine names the OVirtProvider "loadtest"; whether it exists only changes the warnings.
// It returns an error when no request could be measured or ctx ended early (with the partial
// result).
func Run(ctx context.Context, baseURL string, caPEM []byte, clients, requests int) (Result, error) {
	if clients < 1 || requests < 1 {
		return Result{}, fmt.Errorf("clients (%d) and requests (%d) must be at least 1", clients, requests)
	}
	httpClient, closeIdle, err := newHTTPClient(caPEM, clients)
	if err != nil {
		return Result{}, err
	}
	defer closeIdle()

	body, err := reviewOfCreate()
	if err != nil {
		return Result{}, err
	}
	base := strings.TrimRight(baseURL, "/")
	urls := [2]string{base + MutateOVirtMachinePath, base + ValidateOVirtMachinePath}
	return drive(ctx, clients, requests, func(c, i int, buf *bytes.Buffer) bool {
		uid := fmt.Sprintf("%08x-0000-4000-8000-%012x", c, i)
		buf.Write(body.prefix)
		buf.WriteString(uid)
		buf.Write(body.suffix)
		return postReview(ctx, httpClient, urls[i%2], buf.Bytes(), uid)
	})
}

// newHTTPClient returns a client that verifies the server with caPEM and keeps up to clients
// connections open, and the function that closes them.
func newHTTPClient(caPEM []byte, clients int) (*http.Client, func(), error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, errors.New("the CA PEM holds no certificate")
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: clients,
		MaxConnsPerHost:     clients,
		IdleConnTimeout:     time.Minute,
	}
	return &http.Client{Transport: transport, Timeout: 10 * time.Second}, transport.CloseIdleConnections, nil
}

// drive runs clients loops of requests calls of send (which builds its request into buf, sends
// it and reports whether the answer was right) and measures each call.
func drive(ctx context.Context, clients, requests int, send func(c, i int, buf *bytes.Buffer) bool) (Result, error) {
	latencies := make([][]time.Duration, clients)
	errCounts := make([]int, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		latencies[c] = make([]time.Duration, 0, requests)
		wg.Go(func() {
			var buf bytes.Buffer
			for i := range requests {
				if ctx.Err() != nil {
					return
				}
				buf.Reset()
				t0 := time.Now()
				ok := send(c, i, &buf)
				latencies[c] = append(latencies[c], time.Since(t0))
				if !ok {
					errCounts[c]++
				}
			}
		})
	}
	wg.Wait()
	res := Result{Elapsed: time.Since(start)}
	var all []time.Duration
	for c := range clients {
		all = append(all, latencies[c]...)
		res.Errors += errCounts[c]
	}
	res.Requests = len(all)
	if res.Requests == 0 {
		return res, errors.New("no request was sent")
	}
	slices.Sort(all)
	res.P50, res.P99, res.Max = percentile.NearestRank(all, 50), percentile.NearestRank(all, 99), all[len(all)-1]
	res.Throughput = float64(res.Requests) / res.Elapsed.Seconds()
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("load test stopped early: %w", err)
	}
	return res, nil
}

// postReview sends one AdmissionReview and reports whether the answer admits the object.
func postReview(ctx context.Context, c *http.Client, url string, body []byte, uid string) bool {
	out, ok := post(ctx, c, url, body)
	if !ok {
		return false
	}
	review := admissionv1.AdmissionReview{}
	if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
		return false
	}
	return string(review.Response.UID) == uid && review.Response.Allowed
}

// post sends one JSON review and returns the body of a 200 answer.
func post(ctx context.Context, c *http.Client, url string, body []byte) ([]byte, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, false
	}
	return out, true
}

// reviewBody is an AdmissionReview JSON split around its request UID.
type reviewBody struct{ prefix, suffix []byte }

// uidMarker stands for the request UID while the bodies are built.
const uidMarker = "@@UID@@"

// reviewOfCreate builds the AdmissionReview of an OVirtMachine create; the defaulter and the
// validator receive the same request.
func reviewOfCreate() (reviewBody, error) {
	m := &infrav1.OVirtMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "OVirtMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: "worker-load", Namespace: "default"},
		Spec: infrav1.OVirtMachineSpec{OVirtVMSpec: infrav1.OVirtVMSpec{
			Provider: "loadtest", OVirtCluster: "Default", Template: "rhcos-4.14", VMType: infrav1.VMTypeServer,
			DiskClone: ptr.To(true), StorageDomainName: "fast-ssd",
			CPU:          &infrav1.CPU{Sockets: 1, Cores: 4, Threads: 1},
			Memory:       &infrav1.Memory{SizeMB: 8192, GuaranteedMB: 4096},
			OSDiskSizeGB: 80,
			NICs:         []infrav1.NIC{{VnicProfile: "ovirtmgmt"}},
		}},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return reviewBody{}, fmt.Errorf("encoding the OVirtMachine: %w", err)
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       uidMarker,
			Kind:      metav1.GroupVersionKind{Group: infrav1.GroupVersion.Group, Version: infrav1.GroupVersion.Version, Kind: "OVirtMachine"},
			Resource:  metav1.GroupVersionResource{Group: infrav1.GroupVersion.Group, Version: infrav1.GroupVersion.Version, Resource: "ovirtmachines"},
			Name:      m.Name,
			Namespace: m.Namespace,
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	out, err := json.Marshal(review)
	if err != nil {
		return reviewBody{}, fmt.Errorf("encoding the AdmissionReview: %w", err)
	}
	prefix, suffix, ok := bytes.Cut(out, []byte(uidMarker))
	if !ok {
		return reviewBody{}, errors.New("the request UID is not in the encoded AdmissionReview")
	}
	return reviewBody{prefix: prefix, suffix: suffix}, nil
}
