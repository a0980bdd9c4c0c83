package ovirtsim_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestPKIResourceServesTheCAWithoutAuthentication: an operator fetches the Engine's CA from
// /ovirt-engine/services/pki-resource (without trust yet, like `curl -k`) and puts it into the
// OVirtProvider's spec.tls.certs; that CA then verifies the Engine's server certificate.
func TestPKIResourceServesTheCAWithoutAuthentication(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t)
	base := strings.TrimSuffix(sim.URL(), "/api")
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // bootstrapping trust, as an operator does
	get := func(c *http.Client, query string) (int, string, []byte) {
		resp, err := c.Get(base + "/services/pki-resource?" + query)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, resp.Header.Get("Content-Type"), body
	}

	code, ctype, body := get(insecure, "resource=ca-certificate&format=X509-PEM-CA")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(ctype).To(Equal("application/x-x509-ca-cert"))
	g.Expect(body).To(Equal(sim.CAPEM()))

	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(body)).To(BeTrue())
	verified := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	code, _, leafPEM := get(verified, "resource=engine-certificate&format=X509-PEM")
	g.Expect(code).To(Equal(http.StatusOK), "the fetched CA verifies the Engine's certificate")
	block, _ := pem.Decode(leafPEM)
	g.Expect(block).NotTo(BeNil())
	leaf, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"})
	g.Expect(err).NotTo(HaveOccurred())

	code, _, _ = get(insecure, "resource=no-such-thing&format=X509-PEM-CA")
	g.Expect(code).To(Equal(http.StatusBadRequest))
	code, _, _ = get(insecure, "resource=ca-certificate&format=DER-ish")
	g.Expect(code).To(Equal(http.StatusBadRequest))
}
