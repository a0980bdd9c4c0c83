package sdk

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	ovirtsdk "github.com/ovirt/go-ovirt"

	"github.com/capov/capov/pkg/ovirt"
)

// maxDetail caps the detail kept from an engine answer: non-XML bodies (an
// HTML error page from a proxy) would otherwise end up whole in conditions.
const maxDetail = 512

// maxNoHostDetail caps the detail of a scheduling refusal, which explains per host and filter why
// the VM cannot run there (about 150 bytes a host): it is what tells an operator which constraint
// to relax, so it is kept whole for clusters of a few dozen hosts.
const maxNoHostDetail = 8192

var (
	// The SDK only types 401/403/404/409; other faults are plain errors whose
	// text ends with `HTTP response code is "400".`.
	httpCodeRE = regexp.MustCompile(`HTTP response code is "(\d{3})"`)
	// `Fault reason is "Operation Failed". Fault detail is "[Cannot ...]".` A detail may span
	// lines (some Engine messages contain "\n").
	faultReasonRE = regexp.MustCompile(`Fault reason is "(.*?)"\.`)
	faultDetailRE = regexp.MustCompile(`(?s)Fault detail is "(.*?)"\.(?: HTTP response|$)`)
)

// lockPhrases are the engine's ways of saying "locked, try again later"
// (ACTION_TYPE_FAILED_VM_IS_LOCKED, ..._DISKS_LOCKED, ..._OBJECT_LOCKED,
// VM_STATUS_ILLEGAL for an image-locked VM and friends), matched in lower
// case: "VM is locked. Please try again in a few minutes.", "Cannot <action>
// <type> because the VM is in Image Locked status.", "Disk is locked. Please
// try again later.", "Related operation is currently in progress.", "The
// following disks are locked: ...". Older engines send them with 400, newer
// ones with 409. Other 409s (low disk space, illegal storage-domain status,
// NIC name in use, network not in cluster, VM running) are not locks.
var lockPhrases = []string{
	"is locked",
	"are locked",
	"image_locked",
	"image locked status",
	"currently in progress",
	"try again in a few minutes",
	"lock is already taken",
}

// noHostPhrases are the scheduler's ways of saying "no host can run this VM", matched in lower
// case (AppErrors.properties of ovirt-engine):
//   - SCHEDULING_ALL_HOSTS_FILTERED_OUT (409): "Cannot run VM. There is no host that satisfies
//     current scheduling constraints. See below for details:", followed by one
//     SCHEDULING_HOST_FILTERED_REASON[_WITH_DETAIL] per host ("The host h1 did not satisfy internal
//     filter VmAffinityGroups because it matched negative affinity rules ...");
//   - SCHEDULING_NO_HOSTS (400: the message has no error type, so the REST layer falls back to
//     400): "There are no hosts to use. Check that the cluster contains at least one host in Up
//     state.";
//   - ACTION_TYPE_FAILED_VDS_VM_CLUSTER, _MEMORY, _CPUS (409, older Engines): "Cannot run VM.
//     There are no available running Hosts in the Host Cluster." / "... with sufficient memory
//     in VM's Cluster." / "... with enough cores in VM's Cluster.".
var noHostPhrases = []string{
	"there is no host that satisfies current scheduling constraints",
	"there are no hosts to use",
	"there are no available running hosts",
}

func mentionsNoHost(s string) bool {
	s = strings.ToLower(s)
	for _, p := range noHostPhrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func mentionsLock(s string) bool {
	s = strings.ToLower(s)
	for _, p := range lockPhrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// mapError turns an SDK, network or context error into an *ovirt.Error that
// matches the package's sentinels. Already mapped errors pass through. The
// SDK error itself is not wrapped (its types must not leak out of this
// package); its text is kept as the detail.
func mapError(op string, err error) error {
	if err == nil {
		return nil
	}
	var mapped *ovirt.Error
	var breakerOpen *ovirt.BreakerOpenError
	if errors.As(err, &mapped) || errors.As(err, &breakerOpen) {
		return err
	}
	e := &ovirt.Error{Op: op, Detail: truncate(err.Error())}

	var (
		authErr     *ovirtsdk.AuthError
		notFound    *ovirtsdk.NotFoundError
		conflict    *ovirtsdk.ConflictError
		parseErr    *ovirtsdk.ResponseParseError
		urlErr      *url.Error
		netErr      net.Error
		certVerify  *tls.CertificateVerificationError
		unknownAuth x509.UnknownAuthorityError
		hostname    x509.HostnameError
		invalidCert x509.CertificateInvalidError
		recordHdr   tls.RecordHeaderError
	)
	switch {
	case errors.Is(err, context.Canceled):
		e.Detail = "canceled"
		e.Err = context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		e.Detail = "timed out: " + e.Detail
		e.Kinds = []error{ovirt.ErrUnreachable}
		e.Err = context.DeadlineExceeded
	case errors.As(err, &authErr) && authErr.Code == 0 && !loginRefused(err):
		// An SSO error that is not about the credentials (server_error,
		// a proxy answering JSON, ...): the engine's SSO is in trouble.
		e.Kinds = []error{ovirt.ErrUnreachable}
	case errors.As(err, &authErr):
		e.Status = authErr.Code
		e.Detail = faultText(authErr.Msg)
		e.Kinds = []error{ovirt.ErrAuth}
	case errors.As(err, &notFound):
		e.Status = notFound.Code
		e.Detail = faultText(notFound.Msg)
		e.Kinds = []error{ovirt.ErrNotFound}
	case errors.As(err, &conflict) && mentionsNoHost(conflict.Msg):
		// The scheduler's refusal: its per-host explanation may name anything (a host "in
		// maintenance", a filter), but it is never a lock to wait out.
		e.Status = conflict.Code
		e.Detail = faultTextN(conflict.Msg, maxNoHostDetail)
		e.Kinds = []error{ovirt.ErrConflict, ovirt.ErrNoHost}
	case errors.As(err, &conflict):
		e.Status = conflict.Code
		e.Detail = faultText(conflict.Msg)
		e.Kinds = []error{ovirt.ErrConflict}
		if mentionsLock(conflict.Msg) {
			e.Kinds = append(e.Kinds, ovirt.ErrLocked)
		}
	case errors.As(err, &parseErr):
		// A non-XML answer (HTML): the engine's own 401 page, or a proxy or
		// a wrong URL in front of it. A 404 here is not "the VM is gone":
		// mapping it to ErrNotFound could make a reconciler recreate VMs.
		e.Status = parseErr.Code
		switch parseErr.Code {
		case 401, 403:
			e.Kinds = []error{ovirt.ErrAuth}
		case 502, 503, 504:
			e.Kinds = []error{ovirt.ErrUnreachable}
		}
	case errors.As(err, &certVerify), errors.As(err, &unknownAuth), errors.As(err, &hostname),
		errors.As(err, &invalidCert), errors.As(err, &recordHdr):
		e.Kinds = []error{ovirt.ErrTLS, ovirt.ErrUnreachable}
		e.Err = netCause(err)
	case errors.As(err, &urlErr), errors.As(err, &netErr):
		e.Kinds = []error{ovirt.ErrUnreachable}
		e.Err = netCause(err)
		if errors.As(err, &netErr) && netErr.Timeout() {
			e.Detail = "timed out: " + e.Detail
			e.Kinds = append(e.Kinds, context.DeadlineExceeded)
		}
	case strings.Contains(err.Error(), "sso with response"):
		// The SSO endpoint answered something that is not oVirt SSO JSON:
		// a wrong URL or a proxy page. Treat it like an unreachable engine.
		e.Kinds = []error{ovirt.ErrUnreachable}
	default:
		if code := httpCode(err); code != 0 {
			e.Status = code
			e.Detail = faultText(err.Error())
			switch {
			case code == 400 && mentionsNoHost(err.Error()):
				// SCHEDULING_NO_HOSTS alone answers 400; it means what the 409s mean.
				e.Detail = faultTextN(err.Error(), maxNoHostDetail)
				e.Kinds = []error{ovirt.ErrConflict, ovirt.ErrNoHost}
			case code == 400 && mentionsLock(err.Error()):
				e.Kinds = []error{ovirt.ErrLocked}
			case code == 400:
				e.Kinds = []error{ovirt.ErrInvalid}
			case code == 502 || code == 503 || code == 504:
				e.Kinds = []error{ovirt.ErrUnreachable}
			}
		}
	}
	return e
}

// netCause returns the standard-library error under a *url.Error so callers
// can still errors.As a net.Error or x509 error; the URL part carries only
// the API path and search string, never a secret.
func netCause(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr
	}
	return nil
}

// httpCode extracts the HTTP status the SDK wrote into an untyped fault.
func httpCode(err error) int {
	m := httpCodeRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	code, _ := strconv.Atoi(m[1])
	return code
}

// faultText shortens the SDK's fault message to "reason: detail" (the status
// is kept separately); other messages are kept as they are.
func faultText(msg string) string {
	return faultTextN(msg, maxDetail)
}

// faultTextN is faultText with its own cap.
func faultTextN(msg string, limit int) string {
	reason := faultReasonRE.FindStringSubmatch(msg)
	detail := faultDetailRE.FindStringSubmatch(msg)
	switch {
	case reason != nil && detail != nil:
		return truncateN(reason[1]+": "+detail[1], limit)
	case detail != nil:
		return truncateN(detail[1], limit)
	case reason != nil:
		return truncateN(reason[1], limit)
	}
	return truncateN(msg, limit)
}

func truncate(s string) string {
	return truncateN(s, maxDetail)
}

func truncateN(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// resultCode is the metrics "code" label of an SDK call's outcome.
func resultCode(err error) string {
	if err == nil {
		return "2xx"
	}
	var (
		authErr  *ovirtsdk.AuthError
		notFound *ovirtsdk.NotFoundError
		conflict *ovirtsdk.ConflictError
		parseErr *ovirtsdk.ResponseParseError
		netErr   net.Error
	)
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.As(err, &authErr) && authErr.Code != 0:
		return strconv.Itoa(authErr.Code)
	case errors.As(err, &notFound):
		return strconv.Itoa(notFound.Code)
	case errors.As(err, &conflict):
		return strconv.Itoa(conflict.Code)
	case errors.As(err, &parseErr) && parseErr.Code != 0:
		return strconv.Itoa(parseErr.Code)
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	if code := httpCode(err); code != 0 {
		return strconv.Itoa(code)
	}
	return "error"
}

// tokenRejected reports whether the engine refused the SSO token (expired,
// revoked, engine restarted). The engine answers 401 with an HTML
// invalid_grant page, which the SDK surfaces as *ResponseParseError with Code
// 401 rather than *AuthError; a <fault> 401 gives *AuthError with Code 401.
// SSO refusals (*AuthError with Code 0) are bad credentials, not expiry.
func tokenRejected(err error) bool {
	var authErr *ovirtsdk.AuthError
	if errors.As(err, &authErr) && authErr.Code == 401 {
		return true
	}
	var parseErr *ovirtsdk.ResponseParseError
	if errors.As(err, &parseErr) && parseErr.Code == 401 {
		return true
	}
	return strings.Contains(err.Error(), "invalid_grant")
}

// ambiguousAction reports an action (start/stop/shutdown) answer that was
// not XML: the SDK then returns a bare XMLTagNotMatchError without the HTTP
// status, so an expired token cannot be told apart from a proxy error page.
func ambiguousAction(err error) bool {
	var parseErr *ovirtsdk.ResponseParseError
	if errors.As(err, &parseErr) {
		return false
	}
	var tagErr ovirtsdk.XMLTagNotMatchError
	return errors.As(err, &tagErr)
}

// ssoRefusals are the SSO answers that mean "these credentials are not
// accepted": the OAuth error codes the engine uses for a wrong password or a
// locked/disabled account, and the SDK's text for an SSO 401.
var ssoRefusals = []string{"access_denied", "invalid_grant", "unauthorized_client", "authentication failed"}

// loginRefused reports an SSO refusal of the credentials, the only failure
// the auth circuit breaker counts. The SDK turns every SSO error into an
// *AuthError with Code 0 (API faults carry their HTTP status instead), and
// drops the HTTP status, so the OAuth error code in the text tells a refusal
// from an SSO server error.
func loginRefused(err error) bool {
	var authErr *ovirtsdk.AuthError
	if !errors.As(err, &authErr) || authErr.Code != 0 {
		return false
	}
	for _, r := range ssoRefusals {
		if strings.Contains(authErr.Msg, r) {
			return true
		}
	}
	return false
}

// invalid is a client-side validation failure.
func invalid(op, format string, args ...any) error {
	return &ovirt.Error{Op: op, Detail: fmt.Sprintf(format, args...), Kinds: []error{ovirt.ErrInvalid}}
}

// notFound is a lookup that found nothing.
func notFound(op, format string, args ...any) error {
	return &ovirt.Error{Op: op, Detail: fmt.Sprintf(format, args...), Kinds: []error{ovirt.ErrNotFound}}
}
