package webhooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// caPEM returns a self-signed CA certificate in PEM.
func caPEM(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "engine-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestValidateOVirtProviderCreate(t *testing.T) {
	ca := b64(caPEM(t))
	tests := []struct {
		name         string
		mutate       func(*infrav1.OVirtProvider)
		wantErr      []string
		wantWarnings []string
	}{
		{"the product doc example with a credentials Secret is admitted", nil, nil, nil},
		{"a trailing slash on the engine URL is admitted", func(p *infrav1.OVirtProvider) { p.Spec.Engine += "/" }, nil, nil},
		{"only user and pass are admitted with a deprecation warning", func(p *infrav1.OVirtProvider) {
			p.Spec.CredentialsSecretName, p.Spec.User, p.Spec.Pass = "", "admin@internal", "secret"
		}, nil, []string{"spec.user and spec.pass are deprecated and will be removed: create a Secret in the capov-system namespace with the keys username and password and set spec.credentialsSecretName"}},
		{"user and pass next to a Secret are a warning too", func(p *infrav1.OVirtProvider) { p.Spec.User = "admin@internal" }, nil,
			[]string{"they are used only while the Secret ovirt-prod-capov-provider-secret does not exist: remove them"}},
		{"no credentials at all are a warning", func(p *infrav1.OVirtProvider) { p.Spec.CredentialsSecretName = "" }, nil, []string{"no credentials: create a Secret"}},
		{"an http engine URL is refused", func(p *infrav1.OVirtProvider) { p.Spec.Engine = "http://ovirt.example.com/ovirt-engine/api" },
			[]string{`spec.engine: Invalid value: "http://ovirt.example.com/ovirt-engine/api": uses http, which sends the password in clear text; use https (http is only accepted with spec.tls.insecure: true)`}, nil},
		{"an http engine URL is admitted with tls.insecure", func(p *infrav1.OVirtProvider) {
			p.Spec.Engine, p.Spec.TLS = "http://ovirt.example.com/ovirt-engine/api", &infrav1.OVirtProviderTLS{Insecure: true}
		}, nil, nil},
		{"a relative engine URL is refused", func(p *infrav1.OVirtProvider) { p.Spec.Engine = "ovirt.example.com/ovirt-engine/api" },
			[]string{`spec.engine: Invalid value: "ovirt.example.com/ovirt-engine/api": must start with https://`}, nil},
		{"an engine URL without a host is refused", func(p *infrav1.OVirtProvider) { p.Spec.Engine = "https:///ovirt-engine/api" }, []string{"has no host"}, nil},
		{"an engine URL with credentials is refused", func(p *infrav1.OVirtProvider) { p.Spec.Engine = "https://admin:pw@ovirt.example.com/ovirt-engine/api" },
			[]string{"must not embed credentials; use spec.credentialsSecretName"}, nil},
		{"an engine URL with a query is refused", func(p *infrav1.OVirtProvider) { p.Spec.Engine += "?x=1" }, []string{"must not have a query or fragment"}, nil},
		{"an engine URL that is not the API is a warning", func(p *infrav1.OVirtProvider) { p.Spec.Engine = "https://ovirt.example.com/" }, nil,
			[]string{`spec.engine "https://ovirt.example.com/" does not end in /api`}},
		{"a base64 PEM CA is admitted", func(p *infrav1.OVirtProvider) { p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: ca} }, nil, nil},
		{"certs that are not base64 are refused", func(p *infrav1.OVirtProvider) {
			p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: "-----BEGIN CERTIFICATE-----"}
		},
			[]string{"spec.tls.certs: Invalid value: the value is not valid base64; encode the CA PEM file with `base64 -w0 ca.pem`"}, nil},
		{"certs that hold no PEM are refused", func(p *infrav1.OVirtProvider) { p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: b64([]byte("hello"))} },
			[]string{"spec.tls.certs: Invalid value: the value holds no PEM certificate"}, nil},
		{"certs with a private key are refused", func(p *infrav1.OVirtProvider) {
			p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: b64(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))}
		}, []string{`holds a PEM block of type "PRIVATE KEY"`}, nil},
		{"certs whose certificate does not parse are refused", func(p *infrav1.OVirtProvider) {
			p.Spec.TLS = &infrav1.OVirtProviderTLS{Certs: b64(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}))}
		}, []string{"certificate 1 does not parse"}, nil},
		{"insecure together with certs is a warning", func(p *infrav1.OVirtProvider) { p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true, Certs: ca} }, nil,
			[]string{"spec.tls.insecure is true, so the Engine certificate is not verified and spec.tls.certs / spec.tls.cert are ignored"}},
		{"insecure alone is admitted without a warning", func(p *infrav1.OVirtProvider) { p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true} }, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			p := provider("ovirt-prod")
			if tt.mutate != nil {
				tt.mutate(p)
			}
			warnings, err := (&OVirtProviderWebhook{}).ValidateCreate(context.Background(), p)
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
			g.Expect(warnings).To(HaveLen(len(tt.wantWarnings)), "%v", warnings)
			for i, want := range tt.wantWarnings {
				g.Expect(warnings[i]).To(ContainSubstring(want))
			}
		})
	}
}

func TestValidateOVirtProviderUpdate(t *testing.T) {
	legacy := func(p *infrav1.OVirtProvider) {
		p.Spec.CredentialsSecretName, p.Spec.User, p.Spec.Pass = "", "admin@internal", "secret"
	}
	tests := []struct {
		name    string
		old     func(*infrav1.OVirtProvider)
		update  func(*infrav1.OVirtProvider)
		wantErr []string
	}{
		{"a spec update of a legacy provider that leaves credentialsSecretName empty is refused", legacy,
			func(p *infrav1.OVirtProvider) { p.Spec.Engine = "https://other.example.com/ovirt-engine/api" },
			[]string{"spec.credentialsSecretName: Required value: an OVirtProvider cannot be updated without a credentials Secret: create a Secret in the capov-system namespace"}},
		{"an update that removes credentialsSecretName is refused", nil, func(p *infrav1.OVirtProvider) { p.Spec.CredentialsSecretName = "" },
			[]string{"spec.credentialsSecretName: Required value"}},
		{"an update of a legacy provider that sets credentialsSecretName is admitted", legacy,
			func(p *infrav1.OVirtProvider) { p.Spec.CredentialsSecretName = "ovirt-prod-capov-provider-secret" }, nil},
		{"a metadata-only update of a legacy provider is admitted (clusterctl move, garbage collection)", legacy,
			func(p *infrav1.OVirtProvider) {
				p.Annotations = map[string]string{"clusterctl.cluster.x-k8s.io/delete-for-move": ""}
			}, nil},
		{"an update of a legacy provider being deleted is admitted", func(p *infrav1.OVirtProvider) {
			legacy(p)
			p.DeletionTimestamp, p.Finalizers = &metav1.Time{Time: time.Now()}, []string{"example.com/x"}
		}, func(p *infrav1.OVirtProvider) { p.Finalizers = nil }, nil},
		{"an update is checked like a create", nil, func(p *infrav1.OVirtProvider) { p.Spec.Engine = "ftp://ovirt" },
			[]string{"spec.engine: Invalid value"}},
		{"an update with a Secret and a valid spec is admitted", nil, func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = new(bool) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old := provider("ovirt-prod")
			if tt.old != nil {
				tt.old(old)
			}
			obj := old.DeepCopy()
			tt.update(obj)
			_, err := (&OVirtProviderWebhook{}).ValidateUpdate(context.Background(), old, obj)
			g.Expect(causes(err)).To(HaveLen(len(tt.wantErr)), "%v", err)
			for i, want := range tt.wantErr {
				g.Expect(causes(err)[i]).To(ContainSubstring(want))
			}
		})
	}
}
