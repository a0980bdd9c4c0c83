package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	infrav1 "github.com/capov/capov/apis/v1beta2"
)

// watchReady is waitReady through a watch (an informer on every namespace): it returns when each
// of created was first seen Ready, to the event. For thousands of machines, listing them every
// few seconds would cost the API server and the bench (sharing the cores with the manager) more
// CPU than the watch does: a list of 5,000 OVirtMachines is some 40 MB of JSON.
func (r *Runner) watchReady(ctx context.Context, created map[string]time.Time, timeout time.Duration) (map[string]time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := cache.New(r.Stack.Mgmt.Config, cache.Options{Scheme: r.Stack.Mgmt.Scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return nil, fmt.Errorf("creating the OVirtMachine watch: %w", err)
	}
	inf, err := c.GetInformer(ctx, &infrav1.OVirtMachine{})
	if err != nil {
		return nil, fmt.Errorf("creating the OVirtMachine watch: %w", err)
	}
	var mu sync.Mutex
	readyAt := map[string]time.Time{}
	record := func(obj any) {
		om, ok := obj.(*infrav1.OVirtMachine)
		if !ok || !ptr.Deref(om.Status.Initialization.Provisioned, false) {
			return
		}
		if _, ours := created[om.Name]; !ours {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := readyAt[om.Name]; !seen {
			readyAt[om.Name] = time.Now()
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching OVirtMachines: %w", err)
	}
	go func() { _ = c.Start(ctx) }() // ends with cancel
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(readyAt)
	}
	err = poll(ctx, timeout, func() (bool, error) { return count() == len(created), nil })
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("only %d of %d machines Ready: %w", len(readyAt), len(created), err)
	}
	out := make(map[string]time.Time, len(readyAt))
	for k, v := range readyAt {
		out[k] = v
	}
	return out, nil
}
