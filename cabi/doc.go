// Command cabi is libpmix.so.2: the PMIx 4.2.2 client C ABI over the
// pmixbus client library, so that a C program built against OpenPMIx's
// headers (or this package's include/pmix.h) runs on pmixbus unchanged.
// It is built as a shared library, never run:
//
//	go build -buildmode=c-shared \
//		-ldflags="-extldflags '-Wl,-soname,libpmix.so.2 -Wl,--version-script=$PWD/cabi/libpmix.map'" \
//		-o lib/libpmix.so.2 ./cabi
//
//	gcc -I cabi/include prog.c -L lib -l:libpmix.so.2 -o prog
//	LD_LIBRARY_PATH=lib ./prog   # under an agent's launch environment
//	pmixbus run -n 4 ./prog      # the agent puts lib/ (--pmix-lib) on the ranks' path
//
// The split follows MPICH's lesson (keep the shim small): the data helpers
// (PMIx_Info_load, PMIx_Value_*, PMIx_Data_array_*, info lists, the
// *_string functions, the helper functions of 4.2.3+ headers) are plain C
// in values.c and helpers.c and never enter Go; forward.c holds the entry
// points that need the agent, with OpenPMIx's const-correct prototypes,
// forwarding to the goPMIx_* functions this package exports (log.c and
// jobcontrol.c likewise for PMIx_Log and PMIx_Job_control); stubs.c
// defines every other function Debian's libpmix.so.2 exports, returning
// PMIX_ERR_NOT_SUPPORTED. docs/cabi.md lists what is implemented.
//
// Memory the library hands to C — lookup results, the arrays a handler
// receives — comes from C malloc; no Go pointer is ever kept by C. A
// handler's info and results arrays stay valid until it calls its
// completion callback (never NULL), and are freed then.
//
// Every entry point is safe to call from any thread. Handlers run one at a
// time on the client's handler goroutine; a blocking call made from a
// handler returns PMIX_ERR_WOULD_BLOCK (use the _nb form or a callback).
package main
