package webhooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
			[]string{`spec.engine: Invalid value: "http://ovirt.example.com/ovirt-engine/api": uses http, which would send the oVirt password in clear text, and is refused (also with spec.tls.insecure: true, which only skips certificate verification); use the API URL, e.g. https://ovirt.example.com/ovirt-engine/api`}, nil},
		{"an http engine URL is refused with tls.insecure too", func(p *infrav1.OVirtProvider) {
			p.Spec.Engine, p.Spec.TLS = "http://ovirt.example.com/ovirt-engine/api", &infrav1.OVirtProviderTLS{Insecure: true}
		}, []string{"spec.engine: Invalid value: \"http://ovirt.example.com/ovirt-engine/api\": uses http"}, []string{"spec.tls.insecure is true"}},
		{"an HTTP engine URL in capitals is refused", func(p *infrav1.OVirtProvider) { p.Spec.Engine = "HTTP://ovirt.example.com/ovirt-engine/api" },
			[]string{"uses http"}, nil},
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
		{"insecure together with certs is a warning that says they are ignored", func(p *infrav1.OVirtProvider) { p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true, Certs: ca} }, nil,
			[]string{"spec.tls.insecure is true: the Engine certificate is not verified (spec.tls.certs / spec.tls.cert are ignored while it is set)"}},
		{"insecure alone is admitted with a warning naming the field and the fix", func(p *infrav1.OVirtProvider) { p.Spec.TLS = &infrav1.OVirtProviderTLS{Insecure: true} }, nil,
			[]string{"spec.tls.insecure is true: the Engine certificate is not verified, so anyone on the network path can pose as the Engine and receive the oVirt password; " +
				"for development and diagnosis only: remove spec.tls.insecure and set spec.tls.certs to the base64 PEM of the Engine's CA"}},
		{"tls without insecure is no warning", func(p *infrav1.OVirtProvider) { p.Spec.TLS = &infrav1.OVirtProviderTLS{Cert: true} }, nil, nil},
		{"allowedNamespaces with a list and a selector is admitted", func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a"}, Selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"capov.example.com/ovirt-prod": "true"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"dev"}}},
			}}
		}, nil, nil},
		{"an empty allowedNamespaces is admitted", func(p *infrav1.OVirtProvider) { p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{} }, nil, nil},
		{"a list entry that is no namespace name is refused", func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{List: []string{"team-a", "Team_B"}}
		}, []string{`spec.allowedNamespaces.list[1]: Invalid value: "Team_B": must be the name of a namespace (a lowercase RFC 1123 label`}, nil},
		{"a selector with an unknown operator is refused with the fix", func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{Selector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near", Values: []string{"x"}}}}}
		}, []string{`spec.allowedNamespaces.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator; write a label selector as for a Deployment`}, nil},
		{"a selector In without values is refused", func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{Selector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn}}}}
		}, []string{"spec.allowedNamespaces.selector.matchExpressions[0].values: Required value"}, nil},
		{"orphanedVMs Report is admitted", func(p *infrav1.OVirtProvider) { p.Spec.OrphanedVMs = infrav1.OrphanedVMsReport }, nil, nil},
		{"orphanedVMs Delete is admitted with a warning", func(p *infrav1.OVirtProvider) {
			p.Spec.OrphanedVMs, p.Spec.OrphanedVMsGracePeriod = infrav1.OrphanedVMsDelete, &metav1.Duration{Duration: 24 * time.Hour}
		}, nil, []string{"spec.orphanedVMs is Delete: VMs of this Engine with this management cluster's owner marker and no OVirtMachine are removed"}},
		{"a grace period shorter than 10m is refused with the minimum", func(p *infrav1.OVirtProvider) {
			p.Spec.OrphanedVMsGracePeriod = &metav1.Duration{Duration: time.Minute}
		}, []string{`spec.orphanedVMsGracePeriod: Invalid value: "1m0s": must be at least 10m0s, so that a clusterctl move can finish`}, nil},
		{"allowedAffinityGroups with names and a prefix is admitted", func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedAffinityGroups = []string{"db-spread", "team-a-*"}
		}, nil, nil},
		{"allowedAffinityGroups cannot let machines join CAPOV's own groups", func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedAffinityGroups = []string{"capov-team-a-*", "cap*"}
		}, []string{`spec.allowedAffinityGroups[0]: Invalid value: "capov-team-a-*": matches the anti-affinity groups CAPOV creates`,
			`spec.allowedAffinityGroups[1]: Invalid value: "cap*": matches the anti-affinity groups CAPOV creates`}, nil},
		{"a star inside an allowedAffinityGroups entry is refused", func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedAffinityGroups = []string{"team-*-db"}
		}, []string{`spec.allowedAffinityGroups[0]: Invalid value: "team-*-db": "*" may only end an entry`}, nil},
		{"a selector label that is no label is refused", func(p *infrav1.OVirtProvider) {
			p.Spec.AllowedNamespaces = &infrav1.OVirtProviderAllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}}
		}, []string{"spec.allowedNamespaces.selector.matchLabels"}, nil},
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

// machineIn returns an OVirtMachine of namespace ns naming provider.
func machineIn(ns, name, provider string) *infrav1.OVirtMachine {
	return machine(func(m *infrav1.OVirtMachine) { m.Namespace, m.Name, m.Spec.Provider = ns, name, provider })
}

func TestValidateOVirtProviderDelete(t *testing.T) {
	many := make([]client.Object, 0, 12)
	for i := range 12 {
		many = append(many, machineIn("team-a", fmt.Sprintf("worker-%02d", i), "ovirt-prod"))
	}
	tests := []struct {
		name     string
		provider *infrav1.OVirtProvider
		objects  []client.Object
		wantErr  []string
		notIn    []string
	}{
		{"a provider no machine names is deleted", provider("ovirt-prod"), []client.Object{machineIn("default", "other", "ovirt-dev")}, nil, nil},
		{"a provider that machines name is not deleted, and they are named", provider("ovirt-prod"),
			[]client.Object{machineIn("team-b", "cp-0", "ovirt-prod"), machineIn("default", "worker-a", "ovirt-prod"), machineIn("default", "other", "ovirt-dev")},
			[]string{`ovirtproviders.infrastructure.cluster.x-k8s.io "ovirt-prod" is forbidden: 2 OVirtMachines name OVirtProvider ovirt-prod in spec.provider: default/worker-a, team-b/cp-0; ` +
				"their VMs are removed through this provider, so it is deleted only once they are gone: delete them first"}, []string{"default/other"}},
		{"a machine being deleted still holds the provider", provider("ovirt-prod"),
			[]client.Object{machine(func(m *infrav1.OVirtMachine) {
				m.Spec.Provider, m.Finalizers, m.DeletionTimestamp = "ovirt-prod", []string{infrav1.MachineFinalizer}, &metav1.Time{Time: time.Now()}
			})}, []string{"1 OVirtMachine names OVirtProvider ovirt-prod in spec.provider: default/worker-abc123;"}, nil},
		{"more than ten machines are counted, ten are named", provider("ovirt-prod"), many,
			[]string{"12 OVirtMachines name OVirtProvider ovirt-prod", "team-a/worker-09 and 2 more;"}, []string{"worker-10", "worker-11"}},
		{"clusterctl move deletes a provider whatever names it", provider("ovirt-prod", func(p *infrav1.OVirtProvider) {
			p.Annotations = map[string]string{"clusterctl.cluster.x-k8s.io/delete-for-move": ""}
		}), []client.Object{machineIn("default", "worker-a", "ovirt-prod")}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := readerWithObjects(tt.objects...)
			_, err := (&OVirtProviderWebhook{Reader: r, Machines: r}).ValidateDelete(context.Background(), tt.provider)
			if tt.wantErr == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			for _, want := range tt.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			for _, n := range tt.notIn {
				g.Expect(err.Error()).NotTo(ContainSubstring(n))
			}
		})
	}
}

// TestValidateOVirtProviderDeleteFailsWhenMachinesCannotBeListed: without the list the answer is
// unknown; the deletion is refused with a retry hint rather than admitted blindly.
func TestValidateOVirtProviderDeleteFailsWhenMachinesCannotBeListed(t *testing.T) {
	g := NewWithT(t)
	_, err := (&OVirtProviderWebhook{Machines: failingReader{}}).ValidateDelete(context.Background(), provider("ovirt-prod"))
	g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("listing the OVirtMachines that name OVirtProvider ovirt-prod: connection refused; retry the deletion"))
}

func TestValidateOVirtProviderUpdateWarnsAboutShutOutMachines(t *testing.T) {
	objects := []client.Object{
		namespace("team-a", nil), namespace("team-b", map[string]string{"env": "prod"}), namespace("team-c", nil),
		machineIn("team-a", "a-0", "ovirt-prod"), machineIn("team-a", "a-1", "ovirt-prod"),
		machineIn("team-b", "b-0", "ovirt-prod"), machineIn("team-c", "c-0", "ovirt-dev"),
	}
	tests := []struct {
		name    string
		old     func(*infrav1.OVirtProvider)
		update  func(*infrav1.OVirtProvider)
		wantOne string
	}{
		{"restricting to a list warns about the machines of the other namespaces", nil, allowing([]string{"team-b"}, nil),
			"spec.allowedNamespaces no longer allows namespaces in which OVirtMachines name OVirtProvider ovirt-prod: team-a (2 OVirtMachines); " +
				"the manager stops using the provider for them"},
		{"restricting to a selector warns likewise", nil, allowing(nil, map[string]string{"env": "prod"}), "team-a (2 OVirtMachines)"},
		{"shutting out two namespaces names both", nil, allowing([]string{"team-c"}, nil), "team-a (2 OVirtMachines), team-b (1 OVirtMachine)"},
		{"a restriction that keeps every user is no warning", nil, allowing([]string{"team-a"}, map[string]string{"env": "prod"}), ""},
		{"lifting the restriction is no warning", allowing([]string{"team-c"}, nil), func(p *infrav1.OVirtProvider) { p.Spec.AllowedNamespaces = nil }, ""},
		{"a change of another field is no warning", allowing([]string{"team-c"}, nil), func(p *infrav1.OVirtProvider) { p.Spec.DiskClone = new(bool) }, ""},
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
			r := readerWithObjects(objects...)
			warnings, err := (&OVirtProviderWebhook{Reader: r, Machines: r}).ValidateUpdate(context.Background(), old, obj)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.wantOne == "" {
				g.Expect(warnings).To(BeEmpty())
				return
			}
			g.Expect(warnings).To(ConsistOf(ContainSubstring(tt.wantOne)))
		})
	}
}
