// Package percentile computes the latency percentiles that the benchmark (test/bench) and the
// admission load generator (test/webhookload) report, so that both publish numbers of the same
// definition.
package percentile

import (
	"math"
	"time"
)

// NearestRank returns the p-th percentile (0 < p <= 100) of durations sorted in ascending
// order by the nearest-rank method: the smallest value that at least p percent of the values
// do not exceed. It is always one of the values, never an interpolation. p <= 0 gives the
// smallest value, p > 100 the largest; an empty slice gives 0.
func NearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The rank is ceil(p/100 × n). Multiplying first keeps it exact for integral p (p/100
	// first would make p7 of 100 values 0.07 × 100 = 7.000000000000001, rank 8); the slack
	// absorbs the rounding of fractional p (64.4 × 1,000 / 100 is 644.0000000000001 in
	// floating point) and is far below the fraction of any real rank.
	rank := int(math.Ceil(p*float64(len(sorted))/100 - 1e-9))
	return sorted[max(0, min(rank, len(sorted))-1)]
}
