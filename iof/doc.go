// Package iof is pmixbus's I/O forwarding: a job's output stored as
// records in its cluster's JetStream stream (PMIXBUS_IOF) and read from
// there by the launcher and by any viewer (docs/iof.md).
//
// The capturing half is a Service an agent composes: a Source per process
// takes what it writes and stores whole lines, each record numbered per
// channel and stamped, the end of each channel explicit, within the job's
// byte limit.
//
//	svc, err := iof.Open(ctx, iof.ServiceConfig{Conn: nc, Cluster: "east"})
//	src, err := svc.Source(pmix.Proc{Nspace: "job", Rank: 0}, iof.SourceOptions{})
//	cmd.Stdout, cmd.Stderr = src.Stdout(), src.Stderr()
//	… // the process runs
//	err = src.Close() // returns once the last line and the ends are stored
//
// The reading half is Follow (an ordered consumer over a job's records)
// and Attach (pmixbus attach: from the start or the last lines, until the
// job's output ends), with the display pieces: ParseOutput for the
// `--output` option in PRRTE's syntax, a Display that prints records in
// OpenPMIx's formats (or JSON lines, or per-rank files), and an Aggregator
// that shows a help message once per (file, topic) with a count of its
// duplicates every 5 s.
//
//	opts, err := iof.ParseOutput("tag,timestamp")
//	d, err := iof.NewDisplay(iof.Config{Options: opts, Stdout: os.Stdout, Stderr: os.Stderr})
//	err = iof.Attach(ctx, nc, "east", "job", iof.AttachOptions{Follow: true}, func(p iof.Parsed) {
//		if p.Job == "" {
//			d.Write(p.Record) // [Mon Nov 23 11:26:25 2026][job,0]<stdout>: hi
//		}
//	})
//
// Concurrency: Service, Source, Display and Aggregator are safe for
// concurrent use. The Service owns a goroutine per open channel (Close
// stops them); a Follower calls its handler from one goroutine. The
// Aggregator starts none: its owner calls Tick when Next says a count is
// due, and Close at job end.
package iof
