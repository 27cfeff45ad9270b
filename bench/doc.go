// Package bench measures pmixbus against raw NATS on the same servers in
// the same run, and checks the results against the project's targets. Each
// run prints what it measured and ends with one line per target:
//
//	target <name> <measured> <op> <goal> ok|MISS
//
// `pmixbus bench <name>` and the Go benchmarks in this package run the same
// code. Timings are measured, never asserted in tests: a shared 2-core
// machine makes absolute numbers noisy, so timing targets are ratios where
// they can be — to raw NATS, or between two conditions of the same run
// (stalled) — and absolute only where the goal is (scale: memory per
// client, one event to 10k clients).
//
// The scale benchmark runs the NATS server and the clients in helper
// processes, the caller's executable run with ScaleHelperCommand; the
// launch benchmark's ranks are the caller's executable run with
// LaunchRankCommand.
package bench
