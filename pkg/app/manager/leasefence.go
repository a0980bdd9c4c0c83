package manager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"

	"github.com/capov/capov/pkg/ovirt"
)

// leaseFence is the manager's leader-election lock, which remembers when this manager last
// renewed the lease, and the write fence of its oVirt clients (ovirt.FencedFactory): no oVirt
// write starts later than the last successful renewal plus the renew deadline minus a safety
// margin. A leader that stalls (SIGSTOP, a long GC or I/O pause, a partitioned node) past its
// lease and resumes would otherwise write to oVirt until it notices it lost the lease, while
// another manager leads (docs/reliability.md "A stale leader").
type leaseFence struct {
	resourcelock.Interface
	// window is the renew deadline minus the safety margin: how long after a renewal was sent
	// writes may start.
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	renewed time.Time // when the last renewal that succeeded was sent; zero: never led
}

// fenceMargin is the safety margin of the write fence: the longest the lease request itself may
// take (its client's timeout, as controller-runtime sets it: half the renew deadline, at least a
// second) is already inside the renew deadline; the margin keeps back a retry period for the
// time between the fence check and the request leaving (scheduling) and one second for the
// difference between this clock and the other managers'.
func fenceMargin(retryPeriod time.Duration) time.Duration { return retryPeriod + time.Second }

// newLeaseFence creates the lease lock as controller-runtime would (same namespace, name, client
// timeout and identity) and wraps it.
func newLeaseFence(cfg *rest.Config, opts *Options) (*leaseFence, error) {
	lock, err := leaderelection.NewResourceLock(cfg, noEvents{}, leaderelection.Options{
		LeaderElection: true, LeaderElectionID: opts.LeaderElectionID, LeaderElectionNamespace: opts.LeaderElectionNamespace,
		RenewDeadline: opts.RenewDeadline,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the leader-election lock: %w", err)
	}
	return &leaseFence{Interface: lock, window: opts.RenewDeadline - fenceMargin(opts.RetryPeriod), now: time.Now}, nil
}

// Create takes the lease for the first time.
func (l *leaseFence) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	err := l.Interface.Create(ctx, ler)
	l.record(sent, ler, err)
	return err
}

// Update acquires or renews the lease (or releases it, with another holder in ler).
func (l *leaseFence) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	sent := l.now()
	err := l.Interface.Update(ctx, ler)
	l.record(sent, ler, err)
	return err
}

func (l *leaseFence) record(sent time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
	case ler.HolderIdentity == l.Identity():
		if sent.After(l.renewed) {
			l.renewed = sent
		}
	default:
		// Released (ReleaseOnCancel writes an empty holder): no more writes.
		l.renewed = time.Time{}
	}
}

// Check is the write fence: nil while a write may start.
func (l *leaseFence) Check() error {
	l.mu.Lock()
	renewed := l.renewed
	l.mu.Unlock()
	if renewed.IsZero() {
		return errors.New("this manager does not hold the leader-election lease")
	}
	if since := l.now().Sub(renewed); since > l.window {
		return fmt.Errorf("the leader-election lease was last renewed %s ago, longer than the renew deadline minus the safety margin (%s): "+
			"another manager may lead now", since.Round(time.Millisecond), l.window)
	}
	return nil
}

var _ ovirt.Fence = (&leaseFence{}).Check

// noEvents is the lock's event recorder: the lease's own transitions are logged by the manager.
type noEvents struct{}

func (noEvents) GetEventRecorderFor(string) record.EventRecorder { return &record.FakeRecorder{} }
func (noEvents) GetEventRecorder(string) events.EventRecorder    { return &events.FakeRecorder{} }
