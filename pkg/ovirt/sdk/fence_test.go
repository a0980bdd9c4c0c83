package sdk

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
)

// TestAWriteIsFencedRightBeforeItIsSent: the fence closes while a write waits (here between the
// fenced Client's first check and the SDK's send): the SDK checks it again after the rate
// limiter, so the Engine never sees the request (defect 9 of "Safety, third round": a write
// started after the lease could be lost).
func TestAWriteIsFencedRightBeforeItIsSent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	var checks atomic.Int32
	closedAfterFirst := func() error {
		if checks.Add(1) > 1 {
			return errors.New("the leader-election lease was last renewed 9s ago")
		}
		return nil
	}
	c, err := ovirt.FencedFactory(e.f, closedAfterFirst).ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	cluster, err := c.FindCluster(ctx, "Default")
	g.Expect(err).NotTo(HaveOccurred())
	tpl, err := c.FindTemplate(ctx, "rhcos-4.14", "Default")
	g.Expect(err).NotTo(HaveOccurred())

	_, err = c.CreateVM(ctx, ovirt.VMSpec{Name: "fenced", ClusterID: cluster.ID, TemplateID: tpl.ID})
	g.Expect(err).To(MatchError(ovirt.ErrFenced))
	g.Expect(checks.Load()).To(BeEquivalentTo(2), "checked by the Client, then by the SDK before sending")
	for k, n := range sim.Requests() {
		if k.Path == "/sso/oauth/token" {
			continue // the login
		}
		g.Expect(k.Method).To(Equal("GET"), "no write reached the Engine (%v: %d)", k, n)
	}
	_, found := sim.VMByName("fenced")
	g.Expect(found).To(BeFalse())
	g.Expect(e.logs.String()).To(ContainSubstring("Not sending an oVirt write: fenced"))
}
