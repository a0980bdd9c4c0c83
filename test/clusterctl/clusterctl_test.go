package clusterctl_test

import (
	"bytes"
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/capov/capov/test/clusterctl"
)

func TestTheManifestHoldsCertManagersCRDsAndTheStandIn(t *testing.T) {
	g := NewWithT(t)
	raw, err := clusterctl.CertManagerManifest(context.Background(), "example.com/cert-manager-stand-in:test")
	g.Expect(err).NotTo(HaveOccurred())
	kinds := map[string][]string{}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(doc, &u.Object)).To(Succeed(), string(doc))
		kinds[u.GetKind()] = append(kinds[u.GetKind()], u.GetName())
	}
	g.Expect(kinds["CustomResourceDefinition"]).To(ConsistOf(
		"certificates.cert-manager.io", "certificaterequests.cert-manager.io", "issuers.cert-manager.io",
		"clusterissuers.cert-manager.io", "orders.acme.cert-manager.io", "challenges.acme.cert-manager.io"))
	g.Expect(kinds["Deployment"]).To(Equal([]string{"cert-manager"}))
	g.Expect(kinds["Namespace"]).To(Equal([]string{"cert-manager"}))
	g.Expect(string(raw)).To(ContainSubstring("image: example.com/cert-manager-stand-in:test"))
}
