package controllers

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

func TestFindClusterAndTemplateNamesWhatIsMissing(t *testing.T) {
	newClient := func() *fake.Client {
		c := fake.NewDefaultClient()
		other := c.AddCluster(ovirt.Cluster{ID: "cluster-secondary", Name: "Secondary"})
		c.AddTemplate(ovirt.Template{Name: "ubuntu-22.04", Version: 1, ClusterID: other.ID})
		return c
	}
	tests := []struct {
		name       string
		cluster    string
		template   string
		lookupErr  error
		wantReason string
		wantMsg    []string
		wantErr    bool
	}{
		{"a template of the cluster is found", "Default", "rhcos-4.14", nil, "", nil, false},
		{"a wrong cluster is OVirtClusterNotFound, not a missing template", "Nowhere", "rhcos-4.14", nil,
			infrav1.OVirtClusterNotFoundReason, []string{`oVirt cluster "Nowhere" (spec.ovirtcluster) not found`}, false},
		{"a template of another cluster says where it is", "Default", "ubuntu-22.04", nil,
			infrav1.TemplateNotFoundReason, []string{`template "ubuntu-22.04" (spec.template) exists in another oVirt cluster (id cluster-secondary) of another data center, but not in oVirt cluster "Default"`}, false},
		{"a template that exists nowhere is TemplateNotFound in the cluster", "Default", "centos-9", nil,
			infrav1.TemplateNotFoundReason, []string{`template "centos-9" (spec.template) not found in oVirt cluster "Default"`}, false},
		{"a failing lookup is an error for backoff, not a condition", "Default", "centos-9", errors.New("connection reset"), "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := newClient()
			if tt.lookupErr != nil {
				c.FindTemplateFunc = func(context.Context, string, string) (*ovirt.Template, error) { return nil, tt.lookupErr }
			}
			ocl, tpl, miss, err := findClusterAndTemplate(context.Background(), c, tt.cluster, tt.template, "")
			switch {
			case tt.wantErr:
				g.Expect(err).To(MatchError(tt.lookupErr))
			case tt.wantReason == "":
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(miss).To(BeNil())
				g.Expect(ocl.Name).To(Equal(tt.cluster))
				g.Expect(tpl.Name).To(Equal(tt.template))
			default:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(miss).NotTo(BeNil())
				g.Expect(miss.reason).To(Equal(tt.wantReason))
				for _, m := range tt.wantMsg {
					g.Expect(miss.message).To(ContainSubstring(m))
				}
			}
		})
	}
}
