package fake_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/capov/capov/pkg/ovirt"
	"github.com/capov/capov/pkg/ovirt/fake"
)

func TestFakeTagsBehaveLikeTheEngines(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fake.NewDefaultClient()

	root, err := c.FindTag(ctx, "root")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(*root).To(Equal(ovirt.Tag{ID: fake.RootTagID, Name: "root", Description: "root"}), "every Engine has the root tag")
	g.Expect(c.Tags()).To(BeEmpty(), "Tags leaves the root out")

	hb, err := c.CreateTag(ctx, "capov-hb-0123456789abcdef", "writer=a seq=1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(hb.ID).NotTo(BeEmpty())
	g.Expect(hb.Name).To(Equal("capov-hb-0123456789abcdef"))
	found, err := c.FindTag(ctx, "capov-hb-0123456789abcdef")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(Equal(hb))
	got, err := c.GetTag(ctx, hb.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(hb))
	got.Description = "changed"
	again, _ := c.GetTag(ctx, hb.ID)
	g.Expect(again.Description).To(Equal("writer=a seq=1"), "callers get copies")

	_, err = c.CreateTag(ctx, "capov-hb-0123456789abcdef", "writer=b seq=1")
	g.Expect(err).To(MatchError(ovirt.ErrConflict))
	var oe *ovirt.Error
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Status).To(Equal(409))
	g.Expect(oe.Detail).To(ContainSubstring("The specified Tag name already exists."))
	_, err = c.CreateTag(ctx, "CAPOV-HB-0123456789ABCDEF", "")
	g.Expect(err).NotTo(HaveOccurred(), "names are compared case and all")

	for _, bad := range []string{"", "with space", "semi;colon", strings.Repeat("n", 51)} {
		_, err = c.CreateTag(ctx, bad, "")
		g.Expect(err).To(MatchError(ovirt.ErrInvalid), "%q", bad)
	}
	_, err = c.CreateTag(ctx, strings.Repeat("n", 50), strings.Repeat("d", 4001))
	g.Expect(err).To(MatchError(ovirt.ErrInvalid), "a description over 4000 characters")
	_, err = c.CreateTag(ctx, "ünïcödé_1.2-3", "")
	g.Expect(err).NotTo(HaveOccurred(), "letters are any script's")

	g.Expect(c.UpdateTagDescription(ctx, hb.ID, "writer=a seq=2")).To(Succeed())
	got, err = c.GetTag(ctx, hb.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Description).To(Equal("writer=a seq=2"))
	g.Expect(c.UpdateTagDescription(ctx, hb.ID, "")).To(Succeed(), "a description can be emptied")
	g.Expect(c.UpdateTagDescription(ctx, "no-such-tag", "x")).To(MatchError(ovirt.ErrNotFound))
	_, err = c.GetTag(ctx, "no-such-tag")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))
	_, err = c.FindTag(ctx, "no-such-tag")
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	err = c.UpdateTagDescription(ctx, fake.RootTagID, "mine")
	g.Expect(err).To(HaveOccurred(), "the root tag is read-only")
	g.Expect(errors.As(err, &oe)).To(BeTrue())
	g.Expect(oe.Status).To(Equal(500))
	g.Expect(err).NotTo(MatchError(ovirt.ErrNotFound))

	// A tag named "root" can be created (the Engine's name check reads the database, where the
	// root tag is not), and a lookup by name then finds it before the root.
	named, err := c.CreateTag(ctx, "root", "not the root")
	g.Expect(err).NotTo(HaveOccurred())
	found, err = c.FindTag(ctx, "root")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found.ID).To(Equal(named.ID))

	seeded := c.AddTag(ovirt.Tag{Name: "by-hand", Description: "left by an operator"})
	g.Expect(seeded.ID).NotTo(BeEmpty())
	byName, ok := c.TagByName("by-hand")
	g.Expect(ok).To(BeTrue())
	g.Expect(byName).To(Equal(seeded))
	g.Expect(c.Tags()).To(HaveLen(5))
	g.Expect(c.Tags()[0].ID).To(Equal(hb.ID), "in creation order")

	g.Expect(c.DeleteTag(hb.ID)).To(BeTrue())
	g.Expect(c.DeleteTag(hb.ID)).To(BeFalse())
	g.Expect(c.DeleteTag(fake.RootTagID)).To(BeFalse())
	_, err = c.GetTag(ctx, hb.ID)
	g.Expect(err).To(MatchError(ovirt.ErrNotFound))

	c.CreateTagFunc = func(context.Context, string, string) (*ovirt.Tag, error) {
		return nil, &ovirt.Error{Op: "CreateTag", Status: 403, Kinds: []error{ovirt.ErrAuth}}
	}
	_, err = c.CreateTag(ctx, "hooked", "")
	g.Expect(err).To(MatchError(ovirt.ErrAuth))
	g.Expect(c.CallCount("CreateTag")).To(Equal(11), "hooked calls are recorded too")
}
