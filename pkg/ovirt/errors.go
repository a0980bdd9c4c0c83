package ovirt

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Every error returned by a Client or a Factory matches at most
// a few of them with errors.Is; reconcilers branch on these, never on text.
var (
	// ErrNotFound means the engine answered 404 for the object (VM, disk, NIC,
	// ...), or a lookup by name found nothing.
	ErrNotFound = errors.New("not found")

	// ErrLocked means the object is locked by another engine operation (image
	// copy, disk extension, ...). The engine reports this as 409 or as a 400
	// whose detail says so; the right reaction is to requeue and try later.
	ErrLocked = errors.New("locked")

	// ErrAuth means authentication or authorization failed: bad credentials
	// (SSO refused the login), 401 after one transparent re-login, or 403.
	ErrAuth = errors.New("authentication failed")

	// ErrUnreachable means the engine could not be reached or did not answer in
	// time: connection refused, DNS, TLS, timeouts, 502/503/504 from a proxy.
	ErrUnreachable = errors.New("engine unreachable")

	// ErrTLS means the TLS handshake failed, typically because the engine's
	// certificate is not signed by the configured CA. Errors matching ErrTLS
	// also match ErrUnreachable, so callers that only care about connectivity
	// need not know about it.
	ErrTLS = errors.New("TLS verification failed")

	// ErrConflict means the engine answered 409. When its detail names a lock,
	// the error also matches ErrLocked.
	ErrConflict = errors.New("conflict")

	// ErrInvalid means the request is invalid and retrying it unchanged will
	// not help: an engine 400 that is not a lock (disk shrink, name already in
	// use, guaranteed memory above memory, not enough space, ...) or a
	// client-side validation failure. The message keeps the engine's detail.
	ErrInvalid = errors.New("invalid request")

	// ErrNoHost means the Engine's scheduler found no host for the VM: it refused to start it
	// because no host in the cluster is up, has room, or satisfies the VM's enforcing affinity
	// groups ("Cannot run VM. There is no host that satisfies current scheduling constraints.").
	// It also matches ErrConflict (the Engine answers 409); the Detail keeps the Engine's
	// explanation per host and filter.
	ErrNoHost = errors.New("no host satisfies the scheduling constraints")

	// ErrClosed means the Client's connection was closed because the
	// provider's settings (URL, credentials, TLS) changed, the provider was
	// forgotten or the Factory was closed. Ask the Factory for a new Client.
	ErrClosed = errors.New("client closed")
	// ErrFenced means the write was not sent: this manager cannot prove it still holds the
	// leader-election lease (FencedFactory), so another one may lead.
	ErrFenced = errors.New("write fenced: this manager may no longer be the leader")
)

// Error is the error every Client method returns when an engine call fails.
// It carries the engine's detail (fault reason and detail, or the transport
// message) and matches the sentinels listed in Kinds. It never contains a
// password, an SSO token or a custom script.
type Error struct {
	// Op is the Client operation that failed, e.g. "CreateVM".
	Op string
	// Status is the HTTP status the engine answered, 0 when there was no
	// answer (network error, timeout, cancellation, SSO failure).
	Status int
	// Detail is the human-readable cause, as reported by the engine.
	Detail string
	// Kinds are the sentinel errors this error matches (may be empty, e.g.
	// for a 500).
	Kinds []error
	// Err is an underlying standard-library cause (context, network or TLS
	// error), or nil.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("oVirt ")
	b.WriteString(e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap exposes the sentinels and the underlying cause to errors.Is/As.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, len(e.Kinds)+1)
	out = append(out, e.Kinds...)
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// PermissionDenied reports the Engine's refusal of an operation because the account lacks a
// permission for it (USER_NOT_AUTHORIZED_TO_PERFORM_ACTION: HTTP 403 "User is not authorized to
// perform this action."). Such an error also matches ErrAuth; a refused login does not match
// PermissionDenied (it has no HTTP status).
func PermissionDenied(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == 403
}

// BreakerOpenError is returned, instead of attempting a login, while the
// authentication circuit breaker of a credential is open. It exists so that a
// wrong password does not lock an LDAP/IdM account through repeated logins.
// It matches ErrAuth.
type BreakerOpenError struct {
	// Remaining is how long no login will be attempted for this credential.
	Remaining time.Duration
}

// Error implements error.
func (e *BreakerOpenError) Error() string {
	return fmt.Sprintf("oVirt login suspended for %s after repeated authentication failures "+
		"(protects the account from lockout; fix the credentials or wait)", roundRemaining(e.Remaining))
}

// roundRemaining keeps the message readable: seconds for real back-offs,
// milliseconds for the short ones used in tests.
func roundRemaining(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// Unwrap makes the error match ErrAuth.
func (e *BreakerOpenError) Unwrap() error { return ErrAuth }

// RequireArgs is the check every Client makes before any call: each pair is a name and an
// argument ("VM id", vmID, ...); the first empty argument is ErrInvalid naming it.
func RequireArgs(op string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return &Error{Op: op, Detail: pairs[i] + " is empty", Kinds: []error{ErrInvalid}}
		}
	}
	return nil
}
