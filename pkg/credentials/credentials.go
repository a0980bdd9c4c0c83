// Package credentials turns an OVirtProvider into the connection settings of the oVirt access
// layer: it validates the Engine URL and TLS settings and resolves the username and password
// from the credentials Secret, falling back to the deprecated spec.user/spec.pass (product doc
// §7.1). It is the only place that reads those Secrets; nothing it returns is ever logged.
package credentials

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capov/capov/apis/v1beta2"
	"github.com/capov/capov/pkg/engineconfig"
	"github.com/capov/capov/pkg/ovirt"
)

// Secret keys of the credentials Secret.
const (
	UsernameKey = "username"
	PasswordKey = "password"
)

// Source says where the credentials came from.
type Source string

// Sources of credentials.
const (
	// FromSecret: the Secret named by spec.credentialsSecretName.
	FromSecret Source = "Secret"
	// FromSpec: the deprecated spec.user and spec.pass.
	FromSpec Source = "DeprecatedSpecFields"
)

// Error is a problem with the OVirtProvider spec or its Secret that only a change by the user
// fixes. Reason is one of the CanConnectToOVirt reasons of the API package.
type Error struct {
	// Reason is a CanConnectToOVirt condition reason.
	Reason string
	// Message names the field and the fix.
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Resolved is the result of Resolve.
type Resolved struct {
	// Config is what the oVirt client factory needs.
	Config ovirt.Config
	// Source tells where the username and password came from.
	Source Source
	// Secret is the credentials Secret when one was found.
	Secret *corev1.Secret
}

// Resolve validates the provider and finds its credentials. Secrets are read with reader in
// namespace. A missing Secret is not an error when spec.user and spec.pass are set (product doc
// §7.1); a Secret that exists always wins over them.
func Resolve(ctx context.Context, reader client.Reader, namespace string, p *infrav1.OVirtProvider) (*Resolved, error) {
	engine, err := engineconfig.EngineURL(p.Spec.Engine)
	if err != nil {
		return nil, &Error{Reason: infrav1.InvalidEngineURLReason, Message: err.Error()}
	}
	tls, err := TLS(p.Spec.TLS)
	if err != nil {
		return nil, err
	}
	out := &Resolved{Config: ovirt.Config{Provider: p.Name, URL: engine, TLS: tls}}

	if name := p.Spec.CredentialsSecretName; name != "" {
		secret := &corev1.Secret{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret)
		switch {
		case err == nil:
			user, pass := string(secret.Data[UsernameKey]), string(secret.Data[PasswordKey])
			if user == "" || pass == "" {
				return nil, &Error{Reason: infrav1.CredentialsMissingReason, Message: fmt.Sprintf(
					"Secret %s/%s named by spec.credentialsSecretName needs non-empty keys %q and %q", namespace, name, UsernameKey, PasswordKey)}
			}
			out.Config.Credentials = ovirt.Credentials{Username: user, Password: pass}
			out.Source = FromSecret
			out.Secret = secret
			return out, nil
		case apierrors.IsNotFound(err):
			// Fall back to the deprecated fields below.
		default:
			return nil, fmt.Errorf("reading credentials Secret %s/%s: %w", namespace, name, err)
		}
	}
	if p.Spec.User == "" || p.Spec.Pass == "" {
		msg := "no credentials: spec.credentialsSecretName is empty and spec.user/spec.pass are not set; " +
			fmt.Sprintf("create a Secret in %s with keys %q and %q and name it in spec.credentialsSecretName", namespace, UsernameKey, PasswordKey)
		if p.Spec.CredentialsSecretName != "" {
			msg = fmt.Sprintf("Secret %s/%s named by spec.credentialsSecretName does not exist and spec.user/spec.pass are not set; "+
				"create the Secret with keys %q and %q", namespace, p.Spec.CredentialsSecretName, UsernameKey, PasswordKey)
		}
		return nil, &Error{Reason: infrav1.CredentialsMissingReason, Message: msg}
	}
	out.Config.Credentials = ovirt.Credentials{Username: p.Spec.User, Password: p.Spec.Pass}
	out.Source = FromSpec
	return out, nil
}

// TLS turns spec.tls into the access layer's TLS settings. certs (own CA) wins over cert
// (system pool); insecure wins over both.
func TLS(t *infrav1.OVirtProviderTLS) (ovirt.TLS, error) {
	if t == nil {
		return ovirt.TLS{}, nil
	}
	if t.Insecure {
		return ovirt.TLS{Insecure: true}, nil
	}
	if t.Certs == "" {
		return ovirt.TLS{}, nil
	}
	pemBytes, err := engineconfig.DecodeCerts(t.Certs)
	if err != nil {
		return ovirt.TLS{}, &Error{Reason: infrav1.InvalidTLSConfigReason, Message: "spec.tls.certs: " + err.Error()}
	}
	return ovirt.TLS{CAPEM: pemBytes}, nil
}
