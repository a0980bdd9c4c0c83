package sdk

import (
	"sync"
	"time"
)

// lookupCache keeps name lookups (cluster, template, storage domain, vNIC
// profile) for a while: the engine's inventory rarely changes, and without it
// every reconcile of every machine would repeat the same four searches. Only
// successes are cached, so a missing object shows up as soon as it exists.
type lookupCache struct {
	ttl time.Duration // <0: disabled
	now func() time.Time

	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	value   any
	expires time.Time
}

func newLookupCache(ttl time.Duration, now func() time.Time) *lookupCache {
	return &lookupCache{ttl: ttl, now: now, entries: map[string]cacheEntry{}}
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

// cachedLookup returns a copy of the cached value for key, or loads, caches
// and returns a copy of it. Copies keep callers from mutating the cache.
func cachedLookup[T any](c *lookupCache, key string, clone func(*T) *T, load func() (*T, error)) (*T, error) {
	if v, ok := c.get(key); ok {
		return clone(v.(*T)), nil
	}
	v, err := load()
	if err != nil {
		return nil, err
	}
	c.put(key, clone(v))
	return v, nil
}
