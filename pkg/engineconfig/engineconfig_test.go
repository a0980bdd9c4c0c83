package engineconfig

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestEngineURL(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    string
		wantErr string
	}{
		{"an https API URL is kept", "https://ovirt.example.com/ovirt-engine/api", "https://ovirt.example.com/ovirt-engine/api", ""},
		{"a trailing slash is trimmed", " https://ovirt.example.com/ovirt-engine/api/ ", "https://ovirt.example.com/ovirt-engine/api", ""},
		{"http is refused because the password would travel in clear text", "http://ovirt.example.com/ovirt-engine/api", "",
			`spec.engine "http://ovirt.example.com/ovirt-engine/api" uses http, which would send the oVirt password in clear text, and is refused ` +
				"(also with spec.tls.insecure: true, which only skips certificate verification); use the API URL, e.g. https://ovirt.example.com/ovirt-engine/api"},
		{"HTTP in capitals is http", "HTTP://ovirt.example.com/ovirt-engine/api", "", "uses http"},
		{"another scheme is refused", "ftp://ovirt.example.com", "", "must start with https://"},
		{"an empty URL is refused", " ", "", "is empty"},
		{"a URL without a host is refused", "https:///ovirt-engine/api", "", "has no host"},
		{"credentials in the URL are refused", "https://admin:pw@ovirt.example.com/ovirt-engine/api", "", "must not embed credentials"},
		{"a query is refused", "https://ovirt.example.com/ovirt-engine/api?x=1", "", "must not have a query or fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := EngineURL(tt.raw)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
