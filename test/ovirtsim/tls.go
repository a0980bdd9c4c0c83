package ovirtsim

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// newTLS generates a CA and a server certificate signed by it, valid for
// 127.0.0.1, ::1, localhost and the given extra hosts (names or IPs).
func newTLS(hosts []string) (caPEM []byte, cert tls.Certificate, err error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("generating CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "ovirtsim CA", Organization: []string{"CAPOV ovirtsim"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("creating CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("parsing CA certificate: %w", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("generating server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "ovirtsim engine", Organization: []string{"CAPOV ovirtsim"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(2 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !ip.IsUnspecified() && !slices.ContainsFunc(tmpl.IPAddresses, ip.Equal) {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else if !slices.Contains(tmpl.DNSNames, h) {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("creating server certificate: %w", err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	cert = tls.Certificate{Certificate: [][]byte{der, caDER}, PrivateKey: key}
	return caPEM, cert, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// expectListener renames "Expect: 201-created" request headers to
// expectHeader before net/http parses them: Go's server answers 417
// Expectation Failed to any Expect other than 100-continue, while the engine
// honours 201-created (block until created). The rename happens in each
// decrypted read, so a header split across two reads is not renamed.
type expectListener struct{ net.Listener }

// Accept wraps the accepted connection.
func (l expectListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err //nolint:wrapcheck // net/http inspects listener errors (net.Error) itself
	}
	return expectConn{c}, nil
}

type expectConn struct{ net.Conn }

// Read reads and renames the Expect: 201-created headers in what it read.
func (c expectConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	renameExpect(p[:n])
	return n, err //nolint:wrapcheck // io.EOF must stay io.EOF
}

func renameExpect(b []byte) {
	const name = "expect:"
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return
		}
		k := i + j + 1
		if len(b)-k > len(name) && bytes.EqualFold(b[k:k+len(name)], []byte(name)) &&
			bytes.HasPrefix(bytes.ToLower(bytes.TrimLeft(b[k+len(name):], " \t")), []byte("201-created")) {
			copy(b[k:], expectHeader)
		}
		i = k
	}
}
