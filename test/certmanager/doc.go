// Package certmanager is a stand-in for cert-manager in the tests that install the provider as
// users do (clusterctl init and upgrade, the charts): cert-manager's controller, cainjector and
// webhook cannot be built here (their cmd/ submodules are not served by the Go module proxy,
// ../shared/reference/real-node.md), but its CRDs and API types can. The stand-in is installed
// with cert-manager's own CRDs (Manifest) and runs as a process (cmd/cert-manager) or in the
// test process (Run).
//
// What it does, as cert-manager does it:
//
//   - Issuers and ClusterIssuers of the selfSigned and ca kinds become Ready (reasons IsReady and
//     KeyPairVerified); every other kind, none or more than one, and a CA Secret that is missing,
//     unparsable or not a CA, leave them Ready=False with cert-manager's reasons (ErrInitIssuer,
//     ErrGetKeyPair, ErrInvalidKeyPair).
//   - Certificates are issued into spec.secretName (a kubernetes.io/tls Secret with ca.crt,
//     tls.crt and tls.key and cert-manager's annotations), with the key algorithm, size and
//     encoding, duration, usages, isCA and subject alternative names asked for; Ready=True
//     (reason Ready) with notBefore, notAfter, renewalTime and revision in the status. A Secret
//     that is missing, lacks data, holds a key that does not match, was issued by another
//     issuer or for another spec, or is due for renewal, is re-issued: the Ready=False reason
//     is cert-manager's policy reason (DoesNotExist, MissingData, InvalidKeyPair,
//     IncorrectIssuer, SecretMismatch, Renewing, Expired).
//   - CA bundles are injected as cainjector does: the cert-manager.io/inject-ca-from annotation
//     (namespace/Certificate; the Secret must carry the Certificate's name) and
//     cert-manager.io/inject-ca-from-secret (namespace/Secret, which must allow direct
//     injection) on CustomResourceDefinitions (conversion webhook), Validating- and
//     MutatingWebhookConfigurations and APIServices.
//
// It is at least as strict as cert-manager on what it accepts: what cert-manager's admission
// webhook would refuse (no commonName or subject alternative name, an issuerRef kind other than
// Issuer or ClusterIssuer, a key size cert-manager refuses, a duration under an hour or a
// renewBefore not shorter than it, cert-manager.io annotations in the secret template, ...)
// is never issued: the Certificate stays Ready=False and Issuing=False with reason Failed and
// the field errors in the message. Issuers of another API group (external issuers) are never
// signed for. What it does not do: ACME, Vault and Venafi issuers, CertificateRequests (it
// signs directly), keystores (JKS, PKCS#12), additional output formats, name constraints,
// renewal windows, and certificate approval.
package certmanager
