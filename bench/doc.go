// Package bench measures pmixbus against raw NATS on the same servers in
// the same run, and checks the results against the project's targets. Each
// run prints what it measured and ends with one line per target:
//
//	target <name> <measured> <op> <goal> ok|MISS
//
// `pmixbus bench events` and the Go benchmarks in this package run the same
// code. Timings are measured, never asserted in tests: a shared 2-core
// machine makes absolute numbers noisy, so targets are ratios to raw NATS.
package bench
