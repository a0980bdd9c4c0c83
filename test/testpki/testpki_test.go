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

func TestClientCertificatesAuthenticateAgainstTheCA(t *testing.T) {
	ca, err := NewAuthority("client CA")
	if err != nil {
		t.Fatal(err)
	}
	p, err := ca.Issue(Request{CommonName: "admin", Organizations: []string{"system:masters"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	block, _ := pem.Decode(p.CertPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client auth: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate must not serve")
	}
	if got := cert.Subject.Organization; len(got) != 1 || got[0] != "system:masters" {
		t.Errorf("organizations: %v", got)
	}
	if _, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM); err != nil {
		t.Errorf("the CA's key does not match its certificate: %v", err)
	}
}
