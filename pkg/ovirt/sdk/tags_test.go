package sdk

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
)

const rootTagID = "00000000-0000-0000-0000-000000000000"

func TestTagsAgainstTheSimulator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())

	root, err := c.FindTag(ctx, "root")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*root).To(Equal(ovirt.Tag{ID: rootTagID, Name: "root", Description: "root"}), "every Engine has the root tag")
	_, err = c.FindTag(ctx, "capov-hb-0123456789abcdef")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	// Created, then found by name and by id, with text the XML writer would have mangled.
	const name, desc = "capov-hb-0123456789abcdef", `writer=a & b <seq="1">`
	sim.ResetCounters()
	created, err := c.CreateTag(ctx, name, desc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.ID).NotTo(BeEmpty())
	g.Expect(*created).To(Equal(ovirt.Tag{ID: created.ID, Name: name, Description: desc}))
	g.Expect(sim.RequestCount("POST", "/tags")).To(Equal(1))
	states := sim.Tags()
	g.Expect(states).To(HaveLen(1))
	g.Expect(states[0].Parent).To(Equal(rootTagID), "under the root tag")
	g.Expect(states[0].Description).To(Equal(desc))

	_, err = c.CreateTag(ctx, name+"0", "a name that starts like the other")
	g.Expect(err).NotTo(HaveOccurred())
	found, err := c.FindTag(ctx, name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(Equal(created), "the exact name, not a prefix")
	got, err := c.GetTag(ctx, created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(created))
	_, err = c.FindTag(ctx, strings.ToUpper(name))
	g.Expect(err).To(MatchError(ovirt.ErrNotFound), "names match case and all")

	// A name in use: the Engine's 409.
	_, err = c.CreateTag(ctx, name, "another writer")
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	g.Expect(err).NotTo(MatchError(ovirt.ErrLocked))
	g.Expect(err).NotTo(MatchError(ovirt.ErrInvalid))
	var oe *ovirt.Error
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Op).To(Equal("CreateTag"))
	g.Expect(oe.Status).To(Equal(409))
	g.Expect(oe.Detail).To(Equal("Operation Failed: [The specified Tag name already exists.]"))
	got, err = c.GetTag(ctx, created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Description).To(Equal(desc), "the refused create changed nothing")

	// Names the Engine refuses.
	for _, bad := range []string{"capov hb", "capov/hb", strings.Repeat("n", 51)} {
		_, err = c.CreateTag(ctx, bad, "")
		g.Expect(err).To(MatchError(ovirt.ErrInvalid), "%q", bad)
		g.Expect(errors.As(err, &oe)).To(BeTrue())
		g.Expect(oe.Status).To(Equal(400))
	}
	_, err = c.CreateTag(ctx, "", "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))

	// The description is replaced, the name stays.
	g.Expect(c.UpdateTagDescription(ctx, created.ID, `writer=a seq=2 & more`)).To(Succeed())
	got, err = c.GetTag(ctx, created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*got).To(Equal(ovirt.Tag{ID: created.ID, Name: name, Description: "writer=a seq=2 & more"}))
	g.Expect(c.UpdateTagDescription(ctx, created.ID, "")).To(Succeed())
	got, err = c.GetTag(ctx, created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Description).To(BeEmpty(), "an empty description empties it")
	g.Expect(c.UpdateTagDescription(ctx, created.ID, strings.Repeat("d", 4001))).To(MatchError(ovirt.ErrInvalid))

	// Missing tags.
	const missing = "00000000-0000-0000-0000-00000000dead"
	_, err = c.GetTag(ctx, missing)
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	g.Expect(c.UpdateTagDescription(ctx, missing, "x")).To(MatchError(ovirt.ErrNotFound))
	_, err = c.GetTag(ctx, "")
	g.Expect(err).To(MatchError(ovirt.ErrInvalid))
	g.Expect(c.UpdateTagDescription(ctx, "", "x")).To(MatchError(ovirt.ErrInvalid))

	// The root tag is read-only: the Engine fails its edit with a 500 of no kind.
	err = c.UpdateTagDescription(ctx, rootTagID, "mine")
	g.Expect(errors.As(err, &oe)).To(BeTrue(), "%v", err)
	g.Expect(oe.Status).To(Equal(500))
	g.Expect(oe.Kinds).To(BeEmpty())

	for _, op := range []string{"FindTag", "GetTag", "CreateTag", "UpdateTagDescription"} {
		g.Expect(counterValue(e, "requests_total", op, "2xx")).To(BeNumerically(">=", 1), op)
	}
	g.Expect(counterValue(e, "requests_total", "CreateTag", "409")).To(Equal(1.0))
	g.Expect(counterValue(e, "requests_total", "GetTag", "404")).To(Equal(1.0))
}

// TestFindTagReadsTheEngineEveryTime: the heartbeat tag is rewritten by other managers; a lookup
// must never answer from a cache.
func TestFindTagReadsTheEngineEveryTime(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	c, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	other, err := newEnv(t, sim, Options{}).f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())

	created, err := c.CreateTag(ctx, "capov-hb-00000000000000aa", "writer=a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.UpdateTagDescription(ctx, created.ID, "writer=b")).To(Succeed())
	found, err := c.FindTag(ctx, "capov-hb-00000000000000aa")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.Description).To(Equal("writer=b"))
	sim.ResetCounters()
	for range 3 {
		_, err = c.FindTag(ctx, "capov-hb-00000000000000aa")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.GetTag(ctx, created.ID)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(sim.RequestCount("GET", "/tags")).To(Equal(3))
	g.Expect(sim.RequestCount("GET", "/tags/{id}")).To(Equal(3))
}

// TestAFencedTagWriteSendsNothing: with the fence closed, no tag write (nor AddDisk) reaches the
// Engine; the reads still do.
func TestAFencedTagWriteSendsNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := newSim(t)
	e := newEnv(t, sim, Options{})
	open, err := e.f.ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	existing, err := open.CreateTag(ctx, "capov-hb-00000000000000bb", "writer=a seq=1")
	g.Expect(err).NotTo(HaveOccurred())

	fenced, err := ovirt.FencedFactory(e.f, func() error { return errors.New("the lease was last renewed 40s ago") }).ForProvider(ctx, e.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	sim.ResetCounters()
	_, err = fenced.CreateTag(ctx, "capov-hb-00000000000000cc", "writer=b")
	g.Expect(err).To(MatchError(ovirt.ErrFenced))
	g.Expect(fenced.UpdateTagDescription(ctx, existing.ID, "writer=b")).To(MatchError(ovirt.ErrFenced))
	g.Expect(fenced.AssignTag(ctx, "00000000-0000-0000-0000-0000000000aa", existing.ID)).To(MatchError(ovirt.ErrFenced))
	_, err = fenced.AddDisk(ctx, "00000000-0000-0000-0000-0000000000aa", ovirt.DiskSpec{Alias: "d", SizeBytes: gib, StorageDomainID: "sd"})
	g.Expect(err).To(MatchError(ovirt.ErrFenced))
	got, err := fenced.GetTag(ctx, existing.ID)
	g.Expect(err).NotTo(HaveOccurred(), "reads are not fenced")
	g.Expect(got.Description).To(Equal("writer=a seq=1"))
	_, err = fenced.FindTag(ctx, "capov-hb-00000000000000bb")
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(sim.RequestCount("POST", "/tags")).To(BeZero())
	g.Expect(sim.RequestCount("PUT", "/tags/{id}")).To(BeZero())
	for k := range sim.Requests() {
		g.Expect(k.Method).To(Equal("GET"), "no write reached the Engine (%v)", k)
	}
	g.Expect(sim.Tags()).To(HaveLen(1))
	g.Expect(sim.Tags()[0].Description).To(Equal("writer=a seq=1"))

	// A fence that closes after the fenced Client's own check: the SDK checks again right before
	// sending.
	for _, write := range []func(ovirt.Client) error{
		func(c ovirt.Client) error { _, err := c.CreateTag(ctx, "capov-hb-00000000000000dd", "x"); return err },
		func(c ovirt.Client) error { return c.UpdateTagDescription(ctx, existing.ID, "x") },
		func(c ovirt.Client) error {
			return c.AssignTag(ctx, "00000000-0000-0000-0000-0000000000aa", existing.ID)
		},
		func(c ovirt.Client) error {
			_, err := c.AddDisk(ctx, "00000000-0000-0000-0000-0000000000aa", ovirt.DiskSpec{Alias: "d", SizeBytes: gib, StorageDomainID: "sd"})
			return err
		},
	} {
		var checks atomic.Int32
		closing, err := ovirt.FencedFactory(e.f, func() error {
			if checks.Add(1) > 1 {
				return errors.New("the lease was last renewed 9s ago")
			}
			return nil
		}).ForProvider(ctx, e.cfg)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(write(closing)).To(MatchError(ovirt.ErrFenced))
		g.Expect(checks.Load()).To(BeEquivalentTo(2), "checked by the Client, then by the SDK before sending")
	}
	g.Expect(sim.RequestCount("POST", "/tags")).To(BeZero())
	g.Expect(sim.RequestCount("PUT", "/tags/{id}")).To(BeZero())
	for k := range sim.Requests() {
		g.Expect(k.Method).To(Equal("GET"), "no write reached the Engine (%v)", k)
	}
}
