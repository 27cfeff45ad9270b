// Package proto is the wire protocol between an application's client
// library and its node's agent: length-prefixed msgpack frames over a local
// socket. docs/protocol.md describes it for implementers in other languages;
// this package is the reference codec.
//
// Usage:
//
//	err := proto.WriteFrame(w, &proto.Frame{Type: proto.TypeNotify, Seq: 7, Code: pmix.EventNodeDown, Range: pmix.RangeSession})
//	f, err := proto.ReadFrame(r, proto.DefaultMaxFrame)
//
// ReadFrame and WriteFrame are safe for concurrent use on different readers
// and writers; serialize writes to one connection yourself (a frame must not
// interleave with another). The decoder never panics and never allocates
// much more than the frame's own size, whatever the input. A reader of
// batch frames hands their entries back with Frame.Release once it has
// run them, and the next frames decode into them. CheckLengths and
// DecodeChecked give other decoders of untrusted msgpack (publish records,
// event messages, outcome reports) the same bound.
package proto
