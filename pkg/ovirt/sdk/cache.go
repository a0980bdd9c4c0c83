package sdk

import (
	"context"
	"errors"
	"sync"
	"time"
)

// lookupCache keeps name lookups (cluster, template, storage domain, vNIC
// profile) for a while: the engine's inventory rarely changes, and without it
// every reconcile of every machine would repeat the same four searches. Only
// successes are cached, so a missing object shows up as soon as it exists.
// Concurrent misses of one key share one load: when a scale-up starts, ten
// reconciles asking for the same template cost the engine one search, not ten.
type lookupCache struct {
	ttl time.Duration // <0: disabled
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cacheEntry
	loading map[string]*lookupFlight
}

// lookupFlight is a load in progress; done closes when value and err are set.
type lookupFlight struct {
	done  chan struct{}
	value any
	err   error
}

type cacheEntry struct {
	value   any
	expires time.Time
}

func newLookupCache(ttl time.Duration, now func() time.Time) *lookupCache {
	return &lookupCache{ttl: ttl, now: now, entries: map[string]cacheEntry{}, loading: map[string]*lookupFlight{}}
}

func (c *lookupCache) get(key string) (any, bool) {
	if c.ttl < 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return nil, false
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, key)
		return nil, false
	}
	return e.value, true
}

func (c *lookupCache) put(key string, v any) {
	if c.ttl < 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[key] = cacheEntry{value: v, expires: c.now().Add(c.ttl)}
}

// clear drops everything, e.g. when the engine said an id we took from the
// cache does not exist (the object was deleted and maybe recreated).
func (c *lookupCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
}

// join returns the load in progress for key, or starts one that the caller
// (leader) must finish with land.
func (c *lookupCache) join(key string) (f *lookupFlight, leader bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.loading[key]; ok {
		return f, false
	}
	f = &lookupFlight{done: make(chan struct{})}
	c.loading[key] = f
	return f, true
}

func (c *lookupCache) land(key string, f *lookupFlight, v any, err error) {
	c.mu.Lock()
	delete(c.loading, key)
	c.mu.Unlock()
	f.value, f.err = v, err
	close(f.done)
}

// cachedLookup returns a copy of the cached value for key, or loads, caches
// and returns a copy of it. Copies keep callers from mutating the cache. A
// caller that finds a load of the same key in progress waits for its result
// (until ctx ends); if that load ended with its own context, it loads again.
func cachedLookup[T any](ctx context.Context, c *lookupCache, key string, clone func(*T) *T, load func() (*T, error)) (*T, error) {
	if c.ttl < 0 {
		return load()
	}
	for {
		if v, ok := c.get(key); ok {
			return clone(v.(*T)), nil
		}
		f, leader := c.join(key)
		if leader {
			return leadLookup(c, key, f, clone, load)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.done:
		}
		switch {
		case f.err == nil:
			return clone(f.value.(*T)), nil
		case errors.Is(f.err, context.Canceled), errors.Is(f.err, context.DeadlineExceeded):
			// The leader gave up for its own reasons: try again.
		default:
			return nil, f.err
		}
	}
}

// leadLookup runs the load of a flight and always lands it, so that waiters are
// never left behind, not even by a panic.
func leadLookup[T any](c *lookupCache, key string, f *lookupFlight, clone func(*T) *T, load func() (*T, error)) (v *T, err error) {
	var shared *T
	err = errors.New("lookup did not finish")
	defer func() { c.land(key, f, shared, err) }()
	v, err = load()
	if err == nil {
		shared = clone(v)
		c.put(key, shared)
	}
	return v, err
}
