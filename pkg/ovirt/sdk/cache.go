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

// idCache keeps what does not change about an engine object for the life of a connection, keyed
// by its id: a host's name, a cluster's data center. There is no TTL and no invalidation short of
// a new session: a VM's host is read on every GetVM, and without it each would cost one more GET
// /hosts/{id}. Concurrent misses of one id share one load, like the lookup cache.
type idCache struct {
	mu      sync.Mutex
	values  map[string]string
	loading map[string]*idFlight
}

// idFlight is a load in progress; done closes when value and err are set.
type idFlight struct {
	done  chan struct{}
	value string
	err   error
}

func newIDCache() *idCache {
	return &idCache{values: map[string]string{}, loading: map[string]*idFlight{}}
}

// put records a value learnt for free (e.g. a cluster's data center from FindCluster).
func (c *idCache) put(id, value string) {
	if id == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.values[id] = value
}

// clear drops everything (the session closed).
func (c *idCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.values)
}

// get returns the cached value of id, or loads it. load reports whether its value may be kept
// (a definite answer, e.g. "this host is not visible"); errors and values that must not be kept
// are returned to every waiter of that load and asked for again by the next caller.
func (c *idCache) get(ctx context.Context, id string, load func() (value string, keep bool, err error)) (string, error) {
	for {
		c.mu.Lock()
		if v, ok := c.values[id]; ok {
			c.mu.Unlock()
			return v, nil
		}
		f, loading := c.loading[id]
		if !loading {
			f = &idFlight{done: make(chan struct{})}
			c.loading[id] = f
		}
		c.mu.Unlock()

		if !loading {
			return c.lead(id, f, load)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-f.done:
		}
		if f.err == nil || !errors.Is(f.err, context.Canceled) && !errors.Is(f.err, context.DeadlineExceeded) {
			return f.value, f.err
		}
		// The leader gave up for its own reasons: try again.
	}
}

// lead runs the load of a flight and always lands it, so that waiters are never left behind.
func (c *idCache) lead(id string, f *idFlight, load func() (string, bool, error)) (value string, err error) {
	keep := false
	err = errors.New("lookup did not finish")
	defer func() {
		c.mu.Lock()
		delete(c.loading, id)
		if err == nil && keep {
			c.values[id] = value
		}
		c.mu.Unlock()
		f.value, f.err = value, err
		close(f.done)
	}()
	value, keep, err = load()
	return value, err
}
