package load

import (
	"math"
	"math/rand/v2"
	"time"
)

// poissonSchedule is when each of n requests is due, from the start of the run: the first at
// zero, then gaps drawn from the exponential distribution of mean 1/rate, as benchmark_serving
// draws them (n requests span n-1 gaps). A rate of zero or infinity makes every request due at
// zero.
func poissonSchedule(n int, rate float64, seed uint64) []time.Duration {
	due := make([]time.Duration, n)
	if rate == 0 || math.IsInf(rate, 1) {
		return due
	}
	rng := rand.New(rand.NewPCG(seed, 0x9015_5011))
	var t float64 // seconds; summed in floating point so that rounding does not accumulate
	for i := 1; i < n; i++ {
		t += rng.ExpFloat64() / rate
		due[i] = time.Duration(t * float64(time.Second))
	}
	return due
}
