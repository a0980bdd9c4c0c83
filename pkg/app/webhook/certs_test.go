package webhook

import (
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
	"os"
	"path/filepath"
	"time"
)

// testCA issues serving certificates for the webhook server, like the cert-manager Issuer of
// the chart does.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA() (*testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capov-webhook-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue returns the PEM certificate and key of a serving certificate for 127.0.0.1 and
// localhost with the given serial number.
func (ca *testCA) issue(serial int64) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "capov-webhook-service.capov-system.svc"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writeSecretVolume writes tls.crt and tls.key into dir the way the kubelet updates a Secret
// volume: the files are symlinks through ..data to a timestamped directory, and an update swaps
// ..data atomically. This is what cert-manager's rotation looks like to the webhook pod.
func writeSecretVolume(dir string, serial int64, ca *testCA) error {
	certPEM, keyPEM, err := ca.issue(serial)
	if err != nil {
		return err
	}
	version := fmt.Sprintf("..%d_%d", time.Now().UnixNano(), serial)
	if err := os.Mkdir(filepath.Join(dir, version), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version, "tls.crt"), certPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, version, "tls.key"), keyPEM, 0o600); err != nil {
		return err
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(version, filepath.Join(dir, "..data_tmp")); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil {
				return err
			}
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

// servedSerial returns the serial number of the certificate a new TLS handshake with addr
// presents, verified against the CA.
func servedSerial(addr string, ca *testCA) (int64, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}
