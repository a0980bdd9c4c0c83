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
func findClusterAndTemplate(ctx context.Context, c ovirt.Client, clusterName, templateName string) (*ovirt.Cluster, *ovirt.Template, *lookupMiss, error) {
	ocl, err := c.FindCluster(ctx, clusterName)
	if err != nil {
		if errors.Is(err, ovirt.ErrNotFound) {
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
	case err == nil && elsewhere.ClusterID != ocl.ID:
		other := "another oVirt cluster"
		if elsewhere.ClusterID != "" {
			other += " (id " + elsewhere.ClusterID + ")"
		}
		return nil, nil, &lookupMiss{infrav1.TemplateNotFoundReason, fmt.Sprintf(
			"template %q (spec.template) exists in %s but not in oVirt cluster %q (spec.ovirtcluster): "+
				"use a template of cluster %q, or set spec.ovirtcluster to the template's cluster", templateName, other, clusterName, clusterName)}, nil
	case err == nil, errors.Is(err, ovirt.ErrNotFound), errors.Is(err, ovirt.ErrLocked):
		return nil, nil, &lookupMiss{infrav1.TemplateNotFoundReason, fmt.Sprintf(
			"template %q (spec.template) not found in oVirt cluster %q", templateName, clusterName)}, nil
	}
	return nil, nil, nil, fmt.Errorf("finding template %q in any oVirt cluster: %w", templateName, err)
}
