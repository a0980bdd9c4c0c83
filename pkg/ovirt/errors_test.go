package ovirt_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
)

func TestErrorMatchesItsKindsAndCause(t *testing.T) {
	g := NewWithT(t)
	err := fmt.Errorf("reconciling: %w", &ovirt.Error{
		Op: "GetVM", Status: 409, Detail: "Operation Failed: [VM is locked]",
		Kinds: []error{ovirt.ErrConflict, ovirt.ErrLocked},
	})
	g.Expect(errors.Is(err, ovirt.ErrConflict)).To(BeTrue())
	g.Expect(errors.Is(err, ovirt.ErrLocked)).To(BeTrue())
	g.Expect(errors.Is(err, ovirt.ErrNotFound)).To(BeFalse())
	g.Expect(err.Error()).To(Equal("reconciling: oVirt GetVM: HTTP 409: Operation Failed: [VM is locked]"))

	var e *ovirt.Error
	g.Expect(errors.As(err, &e)).To(BeTrue())
	g.Expect(e.Status).To(Equal(409))

	timeout := &ovirt.Error{Op: "Ping", Detail: "timed out", Kinds: []error{ovirt.ErrUnreachable}, Err: context.DeadlineExceeded}
	g.Expect(errors.Is(timeout, context.DeadlineExceeded)).To(BeTrue())
	g.Expect(errors.Is(timeout, ovirt.ErrUnreachable)).To(BeTrue())
	g.Expect(timeout.Error()).To(Equal("oVirt Ping: timed out"))
}

func TestBreakerOpenErrorIsAnAuthErrorWithTheRemainingTime(t *testing.T) {
	g := NewWithT(t)
	var err error = &ovirt.BreakerOpenError{Remaining: 4*time.Minute + 30*time.Second + 400*time.Millisecond}
	g.Expect(errors.Is(err, ovirt.ErrAuth)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("4m30s"))
	var boe *ovirt.BreakerOpenError
	g.Expect(errors.As(fmt.Errorf("wrapped: %w", err), &boe)).To(BeTrue())
	g.Expect(boe.Remaining).To(BeNumerically(">", 4*time.Minute))
	g.Expect((&ovirt.BreakerOpenError{Remaining: 250 * time.Millisecond}).Error()).To(ContainSubstring("250ms"))
}

func TestFingerprint(t *testing.T) {
	base := ovirt.Config{
		Provider:    "p",
		URL:         "https://engine/ovirt-engine/api",
		Credentials: ovirt.Credentials{Username: "admin@internal", Password: "secret"},
		TLS:         ovirt.TLS{CAPEM: []byte("pem")},
	}
	tests := []struct {
		name   string
		change func(*ovirt.Config)
		same   bool
	}{
		{"an identical config has the same fingerprint", func(*ovirt.Config) {}, true},
		{"the provider name does not change the connection", func(c *ovirt.Config) { c.Provider = "q" }, true},
		{"a new password changes it", func(c *ovirt.Config) { c.Credentials.Password = "secret2" }, false},
		{"a new username changes it", func(c *ovirt.Config) { c.Credentials.Username = "other@internal" }, false},
		{"a new URL changes it", func(c *ovirt.Config) { c.URL = "https://other/ovirt-engine/api" }, false},
		{"insecure changes it", func(c *ovirt.Config) { c.TLS.Insecure = true }, false},
		{"a new CA changes it", func(c *ovirt.Config) { c.TLS.CAPEM = []byte("other") }, false},
		{"moving bytes between fields changes it", func(c *ovirt.Config) {
			c.Credentials.Username = "admin@internals"
			c.Credentials.Password = "ecret"
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			changed := base
			tt.change(&changed)
			g.Expect(changed.Fingerprint() == base.Fingerprint()).To(Equal(tt.same))
			g.Expect(base.Fingerprint()).NotTo(ContainSubstring("secret"))
		})
	}
}
