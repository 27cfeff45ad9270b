// Package pmix is the PMIx vocabulary shared by every part of pmixbus:
// statuses, data ranges, persistence, ranks and process identifiers,
// typed key/value pairs ([Info], [Value]), the attribute keys, and their
// msgpack wire form.
//
// Numbers and strings are OpenPMIx's (include/pmix_common.h.in), so that a
// status or range seen in a pmixbus log means what it means in every other
// PMIx. Where the RFCs name something OpenPMIx never defined, the constant's
// doc comment says which value pmixbus chose and why it collides with none of
// OpenPMIx's.
//
// A short example:
//
//	infos := []pmix.Info{
//		pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("checkpointer")),
//		pmix.NewInfo(pmix.KeyEventHdlrFirstInCategory, pmix.Bool(true)),
//		pmix.Required(pmix.NewInfo(pmix.KeyEventWantTermination, pmix.Bool(true))),
//	}
//	b, err := pmix.MarshalInfos(infos)
//	...
//	back, err := pmix.UnmarshalInfos(b) // back equals infos, type for type
//
// Errors carry a [Status]: every error this project returns for a PMIx
// condition is a *[Error], and errors.Is(err, pmix.ErrNotFound) holds for it
// whether it was made here or decoded from the wire. A package's sentinels
// ([NewCodedError]) add a code, so that errors.Is(err, agent.ErrClosed)
// holds for that error alone and not for every error of its status.
//
// Values of this package are plain data; they are safe for concurrent reads.
// [Value]s are immutable once built; []Info slices follow the usual Go rule
// (do not mutate a slice another goroutine reads).
package pmix
