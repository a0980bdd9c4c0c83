package chaos

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// Modes of a run (the CHAOS environment variable).
const (
	// ModeShort is the subset `make test` runs: one seed, short fault windows.
	ModeShort = "short"
	// ModeLong is `make chaos`: every scenario for CHAOS_SEEDS seeds.
	ModeLong = "long"
)

// Config is what a run does. FromEnv reads it from the environment.
type Config struct {
	// Mode is ModeShort or ModeLong.
	Mode string
	// Seeds are run one after the other, each on a fresh stack.
	Seeds []uint64
	// Duration is the fault window of each scenario (the driver creates and deletes machines
	// for that long while the fault is on).
	Duration time.Duration
	// Machines is the most machines the driver keeps alive at once in a scenario.
	Machines int
	// Bound is I5's limit: how long after the fault heals every finalizer must have dropped.
	Bound time.Duration
	// RateFactor and RateFloor make I6's ceilings: a path may be called at most
	// RateFactor x its highest rate of the fault-free baseline + RateFloor times per RateWindow.
	RateFactor float64
	RateFloor  int
	RateWindow time.Duration
	// Doc is the Markdown file whose generated section gets the matrix ("" = none).
	Doc string
	// Report is a JSON file for the results ("" = none).
	Report string
}

// FromEnv reads CHAOS (short or long; empty: the suite does not run), CHAOS_SEED (first seed,
// default 1), CHAOS_SEEDS (how many seeds: 1 short, 3 long), CHAOS_DURATION (fault window:
// 8s short, 30s long), CHAOS_MACHINES (3 short, 5 long), CHAOS_BOUND (I5: 90s), CHAOS_DOC and
// CHAOS_REPORT (read also without CHAOS: CHAOS_FROM re-renders a saved report). ok is false when
// CHAOS is empty.
func FromEnv() (cfg Config, ok bool, err error) {
	cfg.Mode = os.Getenv("CHAOS")
	cfg.Doc, cfg.Report = os.Getenv("CHAOS_DOC"), os.Getenv("CHAOS_REPORT")
	switch cfg.Mode {
	case "":
		return cfg, false, nil
	case ModeShort:
		cfg.Duration, cfg.Machines = 8*time.Second, 3
	case ModeLong:
		cfg.Duration, cfg.Machines = 30*time.Second, 5
	default:
		return cfg, false, fmt.Errorf("CHAOS=%q: use %q or %q", cfg.Mode, ModeShort, ModeLong)
	}
	cfg.Bound = 90 * time.Second
	cfg.RateFactor, cfg.RateFloor, cfg.RateWindow = 3, 30, 10*time.Second
	first, n := uint64(1), 1
	if cfg.Mode == ModeLong {
		n = 3
	}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		if first, err = strconv.ParseUint(v, 10, 64); err != nil {
			return cfg, false, fmt.Errorf("CHAOS_SEED=%q: want a non-negative integer: %w", v, err)
		}
		n = 1
	}
	if v := os.Getenv("CHAOS_SEEDS"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return cfg, false, fmt.Errorf("CHAOS_SEEDS=%q: want a positive integer", v)
		}
	}
	for i := range n {
		cfg.Seeds = append(cfg.Seeds, first+uint64(i))
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		if cfg.Duration, err = time.ParseDuration(v); err != nil || cfg.Duration <= 0 {
			return cfg, false, fmt.Errorf("CHAOS_DURATION=%q: want a positive Go duration such as 30s", v)
		}
	}
	if v := os.Getenv("CHAOS_MACHINES"); v != "" {
		if cfg.Machines, err = strconv.Atoi(v); err != nil || cfg.Machines < 1 {
			return cfg, false, fmt.Errorf("CHAOS_MACHINES=%q: want a positive integer", v)
		}
	}
	if v := os.Getenv("CHAOS_BOUND"); v != "" {
		if cfg.Bound, err = time.ParseDuration(v); err != nil || cfg.Bound <= 0 {
			return cfg, false, fmt.Errorf("CHAOS_BOUND=%q: want a positive Go duration such as 90s", v)
		}
	}
	return cfg, true, nil
}
