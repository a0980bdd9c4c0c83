package controllers

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/credentials"
	"github.com/capov/capov/pkg/ovirt"
)

// Connector gives reconcilers an oVirt client for an OVirtProvider: it resolves the
// credentials and asks the factory, which caches one connection per provider and credential.
type Connector struct {
	// Reader reads the credentials Secrets (a cache limited to Namespace).
	Reader client.Reader
	// Namespace holds the credentials Secrets.
	Namespace string
	// Factory owns the oVirt connections.
	Factory ovirt.Factory
}

// Connect returns a client for the provider. Errors are classified by Classify.
func (c *Connector) Connect(ctx context.Context, p *infrav1.OVirtProvider) (ovirt.Client, *credentials.Resolved, error) {
	resolved, err := credentials.Resolve(ctx, c.Reader, c.Namespace, p)
	if err != nil {
		return nil, nil, err
	}
	cl, err := c.Factory.ForProvider(ctx, resolved.Config)
	if err != nil {
		return nil, resolved, err
	}
	return cl, resolved, nil
}

// ConnectionProblem is the CanConnectToOVirt view of an error.
type ConnectionProblem struct {
	// Reason is the CanConnectToOVirt reason.
	Reason string
	// Message is what the operator reads.
	Message string
	// Critical problems need a change of the OVirtProvider or its Secret; retrying alone
	// does not help (wrong URL, TLS, credentials).
	Critical bool
}

// Classify maps a connection error to a CanConnectToOVirt reason.
func Classify(err error) ConnectionProblem {
	var credErr *credentials.Error
	var breaker *ovirt.BreakerOpenError
	switch {
	case errors.As(err, &credErr):
		return ConnectionProblem{Reason: credErr.Reason, Message: credErr.Message, Critical: true}
	case errors.As(err, &breaker):
		return ConnectionProblem{Reason: infrav1.AuthBreakerOpenReason, Critical: true, Message: fmt.Sprintf(
			"%v; check the username and password in the credentials Secret", err)}
	case errors.Is(err, ovirt.ErrTLS):
		return ConnectionProblem{Reason: infrav1.TLSErrorReason, Critical: true, Message: fmt.Sprintf(
			"%v; check spec.tls (certs: the CA of the Engine; cert: true for a public CA; insecure: true only to diagnose)", err)}
	case errors.Is(err, ovirt.ErrAuth):
		return ConnectionProblem{Reason: infrav1.AuthenticationFailedReason, Critical: true, Message: fmt.Sprintf(
			"%v; check the keys username and password of the credentials Secret (or the deprecated spec.user/spec.pass)", err)}
	case errors.Is(err, ovirt.ErrUnreachable):
		return ConnectionProblem{Reason: infrav1.EngineUnreachableReason, Message: fmt.Sprintf(
			"%v; check spec.engine and the network between the manager and the Engine", err)}
	default:
		return ConnectionProblem{Reason: infrav1.EngineErrorReason, Message: err.Error()}
	}
}

// missingPermission is what an operator reads after the Engine refused an operation for lack
// of a permission (ovirt.PermissionDenied): which action groups on which objects the Engine
// account needs, and where the full list is.
func missingPermission(needs string) string {
	return "the Engine account of the OVirtProvider lacks a permission: it needs " + needs +
		` (docs/operations.md, "The Engine account's permissions")`
}
