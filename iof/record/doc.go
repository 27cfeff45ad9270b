// Package record holds the types of a process's output that travel
// without NATS: the I/O channels and one record of a channel, with the
// help message it may carry. The client library (client/) takes them from
// here, so that it imports nothing that brings NATS in; package iof, which
// stores and follows them in JetStream, names them too (iof.Record is
// record.Record).
//
//	r := record.Record{Channel: record.STDOUT}
//	fmt.Println(r.Channel) // "stdout", as OpenPMIx tags it
//
// The types are plain values: safe for concurrent use as long as a value
// is not written while it is read.
package record
