package percentile

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestNearestRank(t *testing.T) {
	// ms builds a sorted slice 1ms, 2ms, ..., n ms, so that a value is its own rank.
	ms := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * time.Millisecond
		}
		return out
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"no values give zero", nil, 50, 0},
		{"one value is every percentile", ms(1), 99, time.Millisecond},
		{"the median of ten values is the fifth", ms(10), 50, 5 * time.Millisecond},
		{"the median of an odd count is the middle value", ms(5), 50, 3 * time.Millisecond},
		{"p95 of ten values rounds the rank up to the tenth", ms(10), 95, 10 * time.Millisecond},
		{"p21 of ten values rounds the rank 2.1 up to 3", ms(10), 21, 3 * time.Millisecond},
		{"p99 of 100 values is the 99th, not the maximum", ms(100), 99, 99 * time.Millisecond},
		{"p7 of 100 values is the 7th, although 0.07 x 100 is 7.000000000000001 in floating point", ms(100), 7, 7 * time.Millisecond},
		{"p64.4 of 1,000 values is the 644th, although 64.4 x 1,000 / 100 is 644.0000000000001", ms(1000), 64.4, 644 * time.Millisecond},
		{"p99.9 of 1,000 values is the 999th", ms(1000), 99.9, 999 * time.Millisecond},
		{"p99.95 of 1,000 values rounds the rank 999.5 up to the maximum", ms(1000), 99.95, 1000 * time.Millisecond},
		{"p99 of 40,000 values is the 39,600th", ms(40000), 99, 39600 * time.Millisecond},
		{"p100 is the maximum", ms(10), 100, 10 * time.Millisecond},
		{"p0 is the minimum", ms(10), 0, time.Millisecond},
		{"a percentile below zero is the minimum", ms(10), -5, time.Millisecond},
		{"a percentile above 100 is the maximum", ms(10), 150, 10 * time.Millisecond},
		{"repeated values are returned as they are", []time.Duration{1, 1, 1, 7}, 75, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(NearestRank(tc.sorted, tc.p)).To(Equal(tc.want))
		})
	}
}
