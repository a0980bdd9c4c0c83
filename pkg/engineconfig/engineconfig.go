// Package engineconfig validates the parts of an OVirtProvider that describe how to reach the
// Engine: the API URL and the CA certificates. Both the manager and the admission webhook use
// it, so that a value the webhook admits is a value the manager can use, and error messages
// are the same in both places.
package engineconfig

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// EngineURL validates spec.engine and returns it without a trailing slash (the SDK would build
// "api//vms" otherwise). https is required. http is refused whatever spec.tls says: the manager
// logs in with the service account's password, which http would carry in clear text
// (spec.tls.insecure only skips the verification of the certificate of an https Engine).
func EngineURL(raw string) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("spec.engine %q %s; use the API URL, e.g. https://ovirt.example.com/ovirt-engine/api", raw, why)
	}
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return "", bad("is empty")
	}
	u, err := url.Parse(trimmed)
	if err != nil {
		return "", bad("is not a URL")
	}
	switch u.Scheme {
	case "https":
	case "http":
		return "", bad("uses http, which would send the oVirt password in clear text, and is refused (also with spec.tls.insecure: true, " +
			"which only skips certificate verification)")
	default:
		return "", bad("must start with https://")
	}
	if u.Host == "" || u.Hostname() == "" {
		return "", bad("has no host")
	}
	if u.User != nil {
		return "", bad("must not embed credentials; use spec.credentialsSecretName")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", bad("must not have a query or fragment")
	}
	return strings.TrimRight(trimmed, "/"), nil
}

// DecodeCerts decodes spec.tls.certs (base64 of PEM) and checks that it holds at least one
// parseable certificate and nothing else. The error says how to fix the value.
func DecodeCerts(b64 string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return nil, errors.New("is not valid base64; encode the CA PEM file with `base64 -w0 ca.pem`")
	}
	rest := raw
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("holds a PEM block of type %q; only CERTIFICATE blocks of the CA are expected (never a private key)", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %w", n+1, err)
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("holds no PEM certificate; give the base64 of the CA certificate PEM (-----BEGIN CERTIFICATE-----)")
	}
	if len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("has data after the last PEM certificate; give only CA certificates")
	}
	return raw, nil
}
