// Command gopingpong is testdata/pingpong.c with the Go client, in its own
// process: the Go side of BenchmarkNotifyRoundTrip (cabi/bench_test.go),
// so that C and Go clients are compared across the same process
// boundaries. It is launched by an agent (it reads its PMIx environment):
//
//	gopingpong pong     # answers every event -3100 with a -3101, from inside its handler, until stdin closes
//	gopingpong ping N   # notifies -3100 N times, each after the previous answer; prints "rtt_ns <mean>"
//
// "pong" prints "ready" once its handler is registered. Exit status 2 is
// a usage or Init error, 1 a failed call.
//
// Concurrency: the handlers run on the client's handler goroutine; "ping"
// waits for each answer on a buffered channel, so a handler never blocks.
package main
