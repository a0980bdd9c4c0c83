// Package testpki makes the small PKIs tests need: an ECDSA P-256 CA and the server and client
// certificates it signs, valid from an hour ago for two days, as PEM.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Validity is how long every certificate is valid: long enough for any test run, short enough
// that nothing outlives it. Certificates start an hour in the past (clock skew).
const Validity = 48 * time.Hour

// Authority is a CA that signs certificates.
type Authority struct {
	// CertPEM and KeyPEM are the CA certificate and its private key (PKCS #8).
	CertPEM, KeyPEM []byte
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
}

// NewAuthority makes a self-signed CA called name.
func NewAuthority(name string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing the CA certificate: %w", err)
	}
	keyPEM, err := PrivateKeyPEM(key)
	if err != nil {
		return nil, err
	}
	return &Authority{CertPEM: PEM("CERTIFICATE", der), KeyPEM: keyPEM, cert: cert, key: key}, nil
}

// Request is what one leaf certificate says.
type Request struct {
	CommonName    string
	Organizations []string
	DNSNames      []string
	IPs           []net.IP
	// Client makes a client-auth certificate; otherwise it is a server-auth one.
	Client bool
}

// KeyPair is a PEM certificate and its PEM private key (PKCS #8).
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// Issue signs a new key's certificate.
func (a *Authority) Issue(r Request) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generating the key of %s: %w", r.CommonName, err)
	}
	now := time.Now()
	usage := x509.ExtKeyUsageServerAuth
	if r.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: r.CommonName, Organization: r.Organizations},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: r.DNSNames, IPAddresses: r.IPs,
	}, a.cert, key.Public(), a.key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("signing the certificate of %s: %w", r.CommonName, err)
	}
	keyPEM, err := PrivateKeyPEM(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{CertPEM: PEM("CERTIFICATE", der), KeyPEM: keyPEM}, nil
}

// Serving is a CA and a serving certificate it signed, as PEM.
type Serving struct {
	CAPEM, CertPEM, KeyPEM []byte
}

// New makes a CA named caName and a serving certificate (server auth) for dnsNames; the first
// name is also the certificate's common name.
func New(caName string, dnsNames ...string) (*Serving, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("testpki: a serving certificate needs at least one DNS name")
	}
	ca, err := NewAuthority(caName)
	if err != nil {
		return nil, err
	}
	p, err := ca.Issue(Request{CommonName: dnsNames[0], DNSNames: dnsNames})
	if err != nil {
		return nil, err
	}
	return &Serving{CAPEM: ca.CertPEM, CertPEM: p.CertPEM, KeyPEM: p.KeyPEM}, nil
}

// PrivateKeyPEM encodes a private key as PKCS #8 PEM.
func PrivateKeyPEM(key any) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding the private key: %w", err)
	}
	return PEM("PRIVATE KEY", der), nil
}

// PEM encodes one block.
func PEM(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		// crypto/rand does not fail on Linux; a clock-based serial is still valid.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
