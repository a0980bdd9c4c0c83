package ovirtsim

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// instanceIDSince is the first engine version whose GET /api carries
// product_info.instance_id: ovirt-engine commit 5e105acf4f4 ("Add Support for
// UUID of oVirt Instance", first tagged ovirt-engine-4.4.3.8). Older engines
// answer product_info with name, vendor and version only.
var instanceIDSince = engineVersion{major: 4, minor: 4, build: 3}

// atLeast reports whether v is o or newer.
func (v engineVersion) atLeast(o engineVersion) bool {
	if v.major != o.major {
		return v.major > o.major
	}
	if v.minor != o.minor {
		return v.minor > o.minor
	}
	return v.build >= o.build
}

// InstanceID returns the product_info.instance_id that GET /ovirt-engine/api
// reports, or "" when the configured engine version predates 4.4.3 and so
// reports none.
//
// The engine generates its InstanceId once, into vdc_options, when its
// database is created (packaging/dbscripts/upgrade/pre_upgrade/0000_config.sql:
// fn_db_add_config_value('InstanceId', uuid_generate_v1()::varchar, 'general'),
// which never overwrites a value): restarts and upgrades keep it, another
// installation has another one. Likewise the simulator's id is fixed for its
// life (RestartEngine and Reset keep it) and differs between two simulators,
// even two built from the same seed.
func (s *Simulator) InstanceID() string {
	v, err := parseVersion(s.built.Version)
	if err != nil {
		return "" // cannot happen: Build validated the version
	}
	return s.instanceIDFor(v)
}

// instanceIDFor is InstanceID for engine version v. It reads only what Build
// fixed (the seed and the CA), so it needs no lock.
func (s *Simulator) instanceIDFor(v engineVersion) string {
	if !v.atLeast(instanceIDSince) {
		return ""
	}
	// The CA is generated afresh by every Build, which makes the id differ
	// between simulators; the seed is mixed in so that the id is also a
	// function of the configuration, as the engine's is of its database.
	h := sha256.New()
	var seed [8]byte
	binary.BigEndian.PutUint64(seed[:], uint64(s.built.RandomSeed))
	h.Write([]byte("ovirtsim instance id\x00"))
	h.Write(seed[:])
	h.Write(s.caPEM)
	b := h.Sum(nil)[:16]
	// The engine's id comes from uuid_generate_v1: keep its version-1 layout
	// so that a client assuming random (version 4) UUIDs is caught here.
	b[6] = b[6]&0x0f | 0x10
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
