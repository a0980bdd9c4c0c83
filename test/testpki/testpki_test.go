package testpki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

func TestServingCertificateVerifiesAgainstItsCA(t *testing.T) {
	s, err := New("test CA", "svc.ns.svc", "svc.ns.svc.cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(s.CertPEM, s.KeyPEM); err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CAPEM) {
		t.Fatal("CA PEM not parseable")
	}
	block, _ := pem.Decode(s.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"svc.ns.svc", "svc.ns.svc.cluster.local"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.ns.svc"}); err == nil {
		t.Error("the certificate must not be valid for a name it does not list")
	}
	if _, err := New("test CA"); err == nil {
		t.Error("no DNS name must be refused")
	}
}
