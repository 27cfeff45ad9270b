// Package cabi holds libpmix.so.2, the PMIx 4.2.2 client C ABI of pmixbus,
// and its tests: a C library (src/) that speaks the client–agent protocol
// of docs/protocol.md over the agent's socket itself, so that a C program
// built against OpenPMIx's headers (or include/pmix.h here) runs on pmixbus
// unchanged, with no Go runtime in its process. The library is built by the
// repository's Makefile, never by go build:
//
//	make lib                     # lib/libpmix.so.2 (SONAME libpmix.so.2)
//	gcc -I cabi/include prog.c -L lib -l:libpmix.so.2 -o prog
//	LD_LIBRARY_PATH=lib ./prog   # under an agent's launch environment
//	pmixbus run -n 4 ./prog      # the agent puts lib/ (--pmix-lib) on the ranks' path
//
// src/wire.c reads and writes frames and typed values (msgpuck's inline
// encoders, a bounded validator of its own); src/conn.c owns the socket,
// the request table and the one progress thread PMIx_Init starts and
// PMIx_Finalize joins; src/client.c and src/jobctl.c are the entry points
// that need the agent; src/events.c runs handlers and the process's own
// chains (PROC_LOCAL and internal events, ordered as bus/ orders them);
// src/values.c, helpers.c and objects.c are the data helpers, and stubs.c
// every other function Debian's libpmix.so.2 exports, returning
// PMIX_ERR_NOT_SUPPORTED. docs/cabi.md lists what is implemented.
//
// The Go tests here build the library with make, compile the C programs of
// testdata/ against it and run them, alone or under agents and the launch
// service.
package cabi
