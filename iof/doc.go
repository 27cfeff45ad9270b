// Package iof is the display half of pmixbus's I/O forwarding: the Record a
// job's output stream carries, the `--output` option of `pmixbus run` in
// PRRTE's syntax, a Display that prints records in OpenPMIx's formats (or
// JSON lines, or per-rank files), and an Aggregator that shows a help
// message once per (file, topic) with a count of its duplicates every 5 s.
//
// It needs no network: the agents that capture output and the launcher that
// consumes the stream compose it.
//
//	opts, err := iof.ParseOutput("tag,timestamp")
//	if err != nil {
//		return err // pmix.ErrBadParam, naming the directive and the valid ones
//	}
//	d, err := iof.NewDisplay(iof.Config{Options: opts, Stdout: os.Stdout, Stderr: os.Stderr})
//	if err != nil {
//		return err
//	}
//	defer d.Close()
//	d.Write(iof.Record{Nspace: "job@1", Rank: 0, Channel: iof.STDOUT, Data: []byte("hi\n")})
//	// [Mon Nov 23 11:26:25 2026][1,0]<stdout>: hi
//
// Records hold whole lines (the capturing agent cuts them); the Display tags
// every line and ends a tagged record that lacks a newline with one, so a
// tag never lands mid-line.
//
// Concurrency: Display and Aggregator are safe for concurrent use; each
// Display.Write writes its lines in one call under a lock. Neither starts a
// goroutine: the owner of an Aggregator calls Tick when Next says a count is
// due, and Close at job end.
package iof
