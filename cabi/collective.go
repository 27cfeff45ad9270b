package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include <stdlib.h>
#include "cabi.h"
*/
import "C"

import (
	"context"
	"os"
	"slices"
	"strings"
	"unsafe"

	"github.com/pmixbus/pmixbus/pmix"
)

// The key-value exchange (Put, Commit, Get, Store_internal) and the
// collectives (Fence, Connect, Disconnect), over client/collective.go. The
// C side (forward.c) has checked the pointers and the key's length.

// Keys a process reads with PMIx_Get on itself after PMIx_Connect, whose
// OpenPMIx 4.2.2 signature returns a status only: the new nspace pmixbus
// gave the group (PMIX_STRING) and the caller's rank in it
// (PMIX_PROC_RANK), of its latest connect. include/pmix.h names them
// PMIXBUS_CONNECT_NSPACE and PMIXBUS_CONNECT_RANK.
const (
	keyConnectNspace = "pmixbus.cnct.nspace"
	keyConnectRank   = "pmixbus.cnct.rank"
)

// storedKey is a value PMIx_Store_internal stored for a proc.
type storedKey struct {
	proc pmix.Proc
	key  string
}

// cTypes are the keys whose OpenPMIx type is one that pmix.Value carries
// as another of the same width (PMIX_INT and PMIX_PID as int32, PMIX_SIZE
// as uint64): values of these keys go to C with OpenPMIx's type, so that
// a program that checks the type (PMIX_VALUE_UNLOAD, Open MPI's macros)
// finds the one it expects.
var cTypes = map[string]struct {
	carrier pmix.Type
	c       C.pmix_data_type_t
}{
	pmix.KeyExitCode:  {pmix.TypeInt32, C.PMIX_INT},
	pmix.KeyTimeout:   {pmix.TypeInt32, C.PMIX_INT},
	"pmix.evtimeout":  {pmix.TypeInt32, C.PMIX_INT},
	"pmix.wait":       {pmix.TypeInt32, C.PMIX_INT},
	"pmix.job.time":   {pmix.TypeInt32, C.PMIX_INT},
	"pmix.sp.time":    {pmix.TypeInt32, C.PMIX_INT},
	"pmix.ppid":       {pmix.TypeInt32, C.PMIX_PID},
	"pmix.grp.ctxid":  {pmix.TypeUint64, C.PMIX_SIZE},
	"pmix.grp.lclid":  {pmix.TypeUint64, C.PMIX_SIZE},
	"pmix.fab.idx":    {pmix.TypeUint64, C.PMIX_SIZE},
	"pmix.fab.nverts": {pmix.TypeUint64, C.PMIX_SIZE},
}

// putKeyValue stores g, the value of key, in v as putValue does, with the
// type OpenPMIx gives key (cTypes).
func putKeyValue(v *C.pmix_value_t, key string, g pmix.Value) {
	putValue(v, g)
	if t, ok := cTypes[key]; ok && g.Type() == t.carrier {
		v._type = t.c
	}
}

// newValue returns g as a pmix_value_t from C malloc, which the caller
// frees with PMIX_VALUE_RELEASE.
func newValue(key string, g pmix.Value) *C.pmix_value_t {
	v := (*C.pmix_value_t)(C.calloc(1, C.sizeof_pmix_value_t))
	putKeyValue(v, key, g)
	return v
}

// goProcs converts a C proc array; an empty nspace is the caller's.
func goProcs(procs *C.pmix_proc_t, n C.size_t, self pmix.Proc) []pmix.Proc {
	if procs == nil || n == 0 {
		return nil
	}
	out := make([]pmix.Proc, 0, int(n))
	for _, p := range unsafe.Slice(procs, int(n)) {
		g := goProc(&p)
		if g.Nspace == "" {
			g.Nspace = self.Nspace
		}
		out = append(out, g)
	}
	return out
}

// answer gives the status of a call settled without the agent to the
// application: returned by a blocking call, or by an _nb call that failed
// (whose callback is then never called, as in OpenPMIx); a success of an
// _nb call goes to cbfunc from another goroutine, never from inside the
// call itself.
func answer(rc C.pmix_status_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	if cbfunc == nil || rc != C.PMIX_SUCCESS {
		return rc
	}
	go C.cabi_call_opcb(cbfunc, rc, cbdata)
	return C.PMIX_SUCCESS
}

//export goPMIx_Put
func goPMIx_Put(scope C.pmix_scope_t, key *C.char, val *C.pmix_value_t) C.pmix_status_t {
	v, ok := goValue(val)
	if !ok {
		return C.PMIX_ERR_NOT_SUPPORTED // a type that cannot leave the process
	}
	k := C.GoString(key)
	state.mu.Lock()
	defer state.mu.Unlock()
	switch {
	case state.inits == 0:
		return C.PMIX_ERR_INIT
	case state.c != nil:
		return status(state.c.Put(pmix.Scope(scope), k, v))
	case !pmix.Scope(scope).Valid():
		return C.PMIX_ERR_BAD_PARAM
	}
	// A singleton is the only reader of what it puts.
	state.stored[storedKey{state.proc, k}] = v
	return C.PMIX_SUCCESS
}

//export goPMIx_Commit
func goPMIx_Commit() C.pmix_status_t {
	c, rc := attached()
	switch {
	case c != nil:
		return status(c.Commit(context.Background()))
	case rc == C.PMIX_ERR_UNREACH:
		return C.PMIX_SUCCESS // a singleton has no one to commit to
	}
	return rc
}

// goPMIx_Store_internal stores val for proc in this process only: a later
// PMIx_Get of key for proc here returns it. For the caller itself it is a
// PMIX_INTERNAL put, which a later PMIx_Put of the same key replaces.
//
//export goPMIx_Store_internal
func goPMIx_Store_internal(proc *C.pmix_proc_t, key *C.char, val *C.pmix_value_t) C.pmix_status_t {
	v, ok := goValue(val)
	if !ok {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	k := C.GoString(key)
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.inits == 0 {
		return C.PMIX_ERR_INIT
	}
	p := goProcs(proc, 1, state.proc)[0]
	if state.c != nil && p == state.proc {
		return status(state.c.Put(pmix.ScopeInternal, k, v))
	}
	state.stored[storedKey{p, k}] = v
	return C.PMIX_SUCCESS
}

// goPMIx_Get answers PMIx_Get (cbfunc nil: into *val) and PMIx_Get_nb. A
// NULL proc asks the caller's nspace's job-level info (rank WILDCARD), an
// empty nspace the caller's nspace.
//
//export goPMIx_Get
func goPMIx_Get(proc *C.pmix_proc_t, key *C.char, info *C.pmix_info_t, ninfo C.size_t, val **C.pmix_value_t,
	cbfunc C.pmix_value_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	k := C.GoString(key)
	state.mu.Lock()
	if state.inits == 0 {
		state.mu.Unlock()
		return C.PMIX_ERR_INIT
	}
	c, self := state.c, state.proc
	p := pmix.Proc{Nspace: self.Nspace, Rank: pmix.RankWildcard}
	if proc != nil {
		p = goProcs(proc, 1, self)[0]
	}
	v, found := state.stored[storedKey{p, k}]
	if !found && c == nil {
		v, found = singletonValue(self, p, k)
	}
	state.mu.Unlock()
	give := func(v pmix.Value, err error) C.pmix_status_t {
		if err != nil {
			if cbfunc != nil {
				C.cabi_call_valuecb(cbfunc, status(err), nil, cbdata)
			}
			return status(err)
		}
		cv := newValue(k, v)
		if cbfunc == nil {
			*val = cv
			return C.PMIX_SUCCESS
		}
		// As OpenPMIx: the value is the library's, valid during the callback.
		C.cabi_call_valuecb(cbfunc, C.PMIX_SUCCESS, cv, cbdata)
		C.PMIx_Value_free(cv, 1)
		return C.PMIX_SUCCESS
	}
	if found || c == nil {
		var err error
		if !found {
			err = pmix.Errorf(pmix.ErrNotFound, "%s of %v", pmix.Quote(k), p)
		}
		if cbfunc == nil {
			return give(v, err)
		}
		go give(v, err)
		return C.PMIX_SUCCESS
	}
	gi := goInfos(info, ninfo)
	if cbfunc == nil {
		return give(c.Get(context.Background(), p, k, gi))
	}
	c.GetCB(p, k, gi, func(v pmix.Value, err error) { give(v, err) })
	return C.PMIX_SUCCESS
}

// singletonValue is the job-level info of a singleton's own job of one
// process, as OpenPMIx gives a singleton.
func singletonValue(self, p pmix.Proc, key string) (pmix.Value, bool) {
	if p.Nspace != self.Nspace || (p.Rank != pmix.RankWildcard && p.Rank != self.Rank) {
		return pmix.Value{}, false
	}
	switch key {
	case pmix.KeyJobSize, pmix.KeyLocalSize, pmix.KeyUnivSize:
		return pmix.Uint32(1), true
	case pmix.KeyAppNum:
		return pmix.Uint32(0), true
	case pmix.KeyLocalRank, pmix.KeyNodeRank:
		return pmix.Uint16(0), true
	case pmix.KeyLocalPeers:
		return pmix.String("0"), true
	case pmix.KeyHostname:
		host, _ := os.Hostname()
		return pmix.String(host), true
	}
	return pmix.Value{}, false
}

//export goPMIx_Fence
func goPMIx_Fence(procs *C.pmix_proc_t, nprocs C.size_t, info *C.pmix_info_t, ninfo C.size_t,
	cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	c, rc := attached()
	if c == nil {
		if rc == C.PMIX_ERR_UNREACH && singletonOnly(procs, nprocs) {
			rc = C.PMIX_SUCCESS // a singleton fences with itself
		}
		return answer(rc, cbfunc, cbdata)
	}
	ps, gi := goProcs(procs, nprocs, c.Proc()), goInfos(info, ninfo)
	if cbfunc == nil {
		return status(c.Fence(context.Background(), ps, gi))
	}
	c.FenceCB(ps, gi, opCallback(cbfunc, cbdata))
	return C.PMIX_SUCCESS
}

// singletonOnly reports whether procs name no one but the singleton.
func singletonOnly(procs *C.pmix_proc_t, nprocs C.size_t) bool {
	state.mu.Lock()
	self := state.proc
	state.mu.Unlock()
	for _, p := range goProcs(procs, nprocs, self) {
		if !p.Matches(self) {
			return false
		}
	}
	return true
}

// connectKey names a set of procs whatever their order, so that
// PMIx_Disconnect finds the connect of the same procs.
func connectKey(ps []pmix.Proc) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.String()
	}
	slices.Sort(names)
	return strings.Join(names, "\x00")
}

// goPMIx_Connect connects procs (RFC0003, through client.Connect) and
// returns a status only, as OpenPMIx 4.2.2's PMIx_Connect does. The new
// nspace and the caller's rank in it are kept: PMIx_Get of
// keyConnectNspace and keyConnectRank on the caller reads them, and
// PMIx_Disconnect of the same procs leaves that nspace.
//
//export goPMIx_Connect
func goPMIx_Connect(procs *C.pmix_proc_t, nprocs C.size_t, info *C.pmix_info_t, ninfo C.size_t,
	cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	c, rc := attached()
	if c == nil {
		return answer(rc, cbfunc, cbdata)
	}
	ps, gi := goProcs(procs, nprocs, c.Proc()), goInfos(info, ninfo)
	done := func(ns string, rank pmix.Rank, err error) C.pmix_status_t {
		if err != nil {
			return status(err)
		}
		state.mu.Lock()
		defer state.mu.Unlock()
		if state.connects == nil {
			return C.PMIX_ERR_INIT // finalized meanwhile
		}
		key := connectKey(ps)
		state.connects[key] = append(state.connects[key], ns)
		if ns != "" {
			self := c.Proc()
			state.stored[storedKey{self, keyConnectNspace}] = pmix.String(ns)
			state.stored[storedKey{self, keyConnectRank}] = pmix.RankValue(rank)
		}
		return C.PMIX_SUCCESS
	}
	if cbfunc == nil {
		return done(c.Connect(context.Background(), ps, gi))
	}
	c.ConnectCB(ps, gi, func(ns string, rank pmix.Rank, err error) {
		C.cabi_call_opcb(cbfunc, done(ns, rank, err), cbdata)
	})
	return C.PMIX_SUCCESS
}

// goPMIx_Disconnect leaves the nspace of the latest connect of the same
// procs (in any order); PMIX_ERR_INVALID_NAMESPACE when there was none.
// A connect made with PMIX_CONNECT_XCHG_ONLY has no nspace to leave: its
// disconnect succeeds at once.
//
//export goPMIx_Disconnect
func goPMIx_Disconnect(procs *C.pmix_proc_t, nprocs C.size_t, info *C.pmix_info_t, ninfo C.size_t,
	cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	c, rc := attached()
	if c == nil {
		return answer(rc, cbfunc, cbdata)
	}
	key := connectKey(goProcs(procs, nprocs, c.Proc()))
	state.mu.Lock()
	nss := state.connects[key]
	state.mu.Unlock()
	if len(nss) == 0 {
		return answer(C.PMIX_ERR_INVALID_NAMESPACE, cbfunc, cbdata)
	}
	ns := nss[len(nss)-1]
	done := func(err error) C.pmix_status_t {
		if err != nil {
			return status(err)
		}
		state.mu.Lock()
		defer state.mu.Unlock()
		if nss := state.connects[key]; len(nss) > 0 {
			if i := slices.Index(nss, ns); i >= 0 {
				state.connects[key] = slices.Delete(nss, i, i+1)
			}
		}
		return C.PMIX_SUCCESS
	}
	if ns == "" {
		return answer(done(nil), cbfunc, cbdata)
	}
	gi := goInfos(info, ninfo)
	if cbfunc == nil {
		return done(c.Disconnect(context.Background(), ns, gi))
	}
	c.DisconnectCB(ns, gi, func(err error) { C.cabi_call_opcb(cbfunc, done(err), cbdata) })
	return C.PMIX_SUCCESS
}
