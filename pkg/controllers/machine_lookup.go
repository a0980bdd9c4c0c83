package controllers

import (
	"context"
	"errors"
	"fmt"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/ovirt"
)

// lookupMiss is an oVirt object named in the spec that does not exist: the MachineCreated
// reason and message to report.
type lookupMiss struct {
	reason  string
	message string
}

// findClusterAndTemplate looks up the oVirt cluster of spec.ovirtcluster and then the template
// of spec.template in it. The template lookup is scoped to the cluster, so the cluster comes
// first: a wrong spec.ovirtcluster is reported as OVirtClusterNotFound, not as a missing
// template. When the template is not in the cluster, one more lookup without the cluster tells
// a template that exists only in another oVirt cluster (a wrong ovirtcluster or template, or a
// template not copied there yet) from one that does not exist at all. A miss is returned as
// *lookupMiss with a nil error; err is for everything retrying with backoff can cure.
//
// Templates are data-center wide in oVirt: a template whose cluster is another cluster of the
// same data center is usable, and is returned. failureDomain names the failure domain that chose
// the cluster ("" for spec.ovirtcluster), for the messages.
func findClusterAndTemplate(ctx context.Context, c ovirt.Client, clusterName, templateName, failureDomain string) (*ovirt.Cluster, *ovirt.Template, *lookupMiss, error) {
	source := "spec.ovirtcluster"
	if failureDomain != "" {
		source = fmt.Sprintf("the oVirt cluster of failure domain %q", failureDomain)
	}
	ocl, err := c.FindCluster(ctx, clusterName)
	if err != nil {
		if errors.Is(err, ovirt.ErrNotFound) {
			if failureDomain != "" {
				return nil, nil, &lookupMiss{infrav1.OVirtClusterNotFoundReason, fmt.Sprintf(
					"oVirt cluster %q (%s) not found: fix the failure domain in the OVirtCluster's spec.failureDomains (Compute > Clusters in oVirt lists the clusters)", clusterName, source)}, nil
			}
			return nil, nil, &lookupMiss{infrav1.OVirtClusterNotFoundReason, fmt.Sprintf(
				"oVirt cluster %q (spec.ovirtcluster) not found: the OVirtMachineTemplate must name an existing oVirt cluster (Compute > Clusters in oVirt)", clusterName)}, nil
		}
		return nil, nil, nil, fmt.Errorf("finding oVirt cluster %q: %w", clusterName, err)
	}
	tpl, err := c.FindTemplate(ctx, templateName, clusterName)
	if err == nil {
		return ocl, tpl, nil, nil
	}
	if !errors.Is(err, ovirt.ErrNotFound) {
		return nil, nil, nil, fmt.Errorf("finding template %q: %w", templateName, err)
	}
	elsewhere, err := c.FindTemplate(ctx, templateName, "")
	switch {
	case err == nil && elsewhere.DataCenterID != "" && elsewhere.DataCenterID == ocl.DataCenterID:
		// Another cluster of the same data center: usable here.
		return ocl, elsewhere, nil, nil
	case err == nil && failureDomain != "":
		return nil, nil, &lookupMiss{infrav1.TemplateNotInFailureDomainReason, fmt.Sprintf(
			"template %q (spec.template) is in another data center than oVirt cluster %q (%s): templates can only be used in the clusters of their data center; copy the template there or fix the failure domain",
			templateName, clusterName, source)}, nil
	case err == nil && elsewhere.ClusterID != ocl.ID:
		other := "another oVirt cluster"
		if elsewhere.ClusterID != "" {
			other += " (id " + elsewhere.ClusterID + ")"
		}
		return nil, nil, &lookupMiss{infrav1.TemplateNotFoundReason, fmt.Sprintf(
			"template %q (spec.template) exists in %s of another data center, but not in oVirt cluster %q (spec.ovirtcluster): "+
				"use a template of cluster %q, or set spec.ovirtcluster to the template's cluster", templateName, other, clusterName, clusterName)}, nil
	case err == nil, errors.Is(err, ovirt.ErrNotFound), errors.Is(err, ovirt.ErrLocked):
		return nil, nil, &lookupMiss{infrav1.TemplateNotFoundReason, fmt.Sprintf(
			"template %q (spec.template) not found in oVirt cluster %q (%s)", templateName, clusterName, source)}, nil
	}
	return nil, nil, nil, fmt.Errorf("finding template %q in any oVirt cluster: %w", templateName, err)
}
