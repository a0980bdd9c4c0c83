package operator

import (
	"testing"

	"github.com/capov/capov/test/testpki"
)

// keyPair is a PEM certificate and its PEM private key.
type keyPair struct{ cert, key []byte }

// newWebhookPKI makes what an operator's PKI gives for certificates.source=secret: a CA and a
// serving certificate for the given DNS names, signed by it. It returns the CA's PEM.
func newWebhookPKI(t *testing.T, dnsNames []string) (caPEM []byte, serving keyPair) {
	t.Helper()
	s, err := testpki.New("capov e2e CA", dnsNames...)
	if err != nil {
		t.Fatal(err)
	}
	return s.CAPEM, keyPair{cert: s.CertPEM, key: s.KeyPEM}
}
