package main

// meterbench reads one variable of its own, here, the only file of the binary that reads the environment: GOGC,
// which the Go runtime follows and which, when set, the embedded NATS's tuning keeps. Its scratch database's
// server comes from GPUMARKET_TEST_DATABASE_URL, read by the test support it shares with the tests (dbtest).
// README.md's table of the tests' and benchmarks' variables lists both.

import "os"

// gogcSet says whether GOGC is set, for natsserver.TuneGCForEmbedded.
func gogcSet() bool {
	_, ok := os.LookupEnv("GOGC")
	return ok
}
