package manager

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// memLock is an in-memory resourcelock.Interface whose writes can be made to fail.
type memLock struct {
	id   string
	rec  *resourcelock.LeaderElectionRecord
	fail bool
}

func (m *memLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if m.rec == nil {
		return nil, nil, errors.New("not found")
	}
	r := *m.rec
	return &r, nil, nil
}

func (m *memLock) write(ler resourcelock.LeaderElectionRecord) error {
	if m.fail {
		return errors.New("the API server did not answer")
	}
	m.rec = &ler
	return nil
}
func (m *memLock) Create(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return m.write(ler)
}
func (m *memLock) Update(_ context.Context, ler resourcelock.LeaderElectionRecord) error {
	return m.write(ler)
}
func (m *memLock) RecordEvent(string) {}
func (m *memLock) Identity() string   { return m.id }
func (m *memLock) Describe() string   { return "memory/lease" }

// TestTheWriteFenceFollowsTheLease: writes may start only within the renew deadline minus the
// margin after the last renewal this manager sent and the API server accepted (defect 9 of
// "Safety, third round").
func TestTheWriteFenceFollowsTheLease(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	lock := &memLock{id: "manager-a_1"}
	const renewDeadline, retryPeriod = 10 * time.Second, 2 * time.Second
	f := &leaseFence{Interface: lock, window: renewDeadline - fenceMargin(retryPeriod), now: func() time.Time { return now }}
	g.Expect(f.window).To(Equal(7 * time.Second))

	g.Expect(f.Check()).To(MatchError(ContainSubstring("does not hold the leader-election lease")), "a follower writes nothing")
	ours := resourcelock.LeaderElectionRecord{HolderIdentity: "manager-a_1"}
	g.Expect(f.Create(ctx, ours)).To(Succeed())
	g.Expect(f.Check()).To(Succeed())
	now = now.Add(7 * time.Second)
	g.Expect(f.Check()).To(Succeed(), "up to the window")
	now = now.Add(time.Millisecond)
	g.Expect(f.Check()).To(MatchError(ContainSubstring("last renewed 7.001s ago")), "the frozen leader resumes: fenced")

	g.Expect(f.Update(ctx, ours)).To(Succeed())
	g.Expect(f.Check()).To(Succeed(), "renewed")

	// A renewal that fails does not extend the window.
	lock.fail = true
	now = now.Add(5 * time.Second)
	g.Expect(f.Update(ctx, ours)).NotTo(Succeed())
	now = now.Add(3 * time.Second)
	g.Expect(f.Check()).To(HaveOccurred())

	// Releasing the lease (an empty holder) closes the fence at once.
	lock.fail = false
	g.Expect(f.Update(ctx, ours)).To(Succeed())
	g.Expect(f.Check()).To(Succeed())
	g.Expect(f.Update(ctx, resourcelock.LeaderElectionRecord{})).To(Succeed())
	g.Expect(f.Check()).To(HaveOccurred())
}
