package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include <stdlib.h>
#include "cabi.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

func main() {}

// attachTimeout bounds PMIx_Init's attach and PMIx_Finalize's detach.
const attachTimeout = 30 * time.Second

// pending is the id of a registration the client has not answered yet
// (the bus numbers registrations from 1).
const pending bus.ID = 0

// failedRef is the registration reference a failed non-blocking
// registration reports, as OpenPMIx 4.2.2 does.
const failedRef = math.MaxUint32

// state is the library's: the attached client, or none in a singleton,
// and the application's event registrations by reference.
var state struct {
	mu        sync.Mutex
	inits     int            // PMIx_Init calls not yet finalized
	c         *client.Client // nil in a singleton
	proc      pmix.Proc
	nextRef   uint64
	refs      map[uint64]bus.ID // reference → the client's id (pending until known)
	singleton bool
	stored    map[storedKey]pmix.Value // PMIx_Store_internal's, and a singleton's puts
	connects  map[string][]string      // the new nspaces of the connects made, by their procs (connectKey)
}

// attached returns the client, or the status a call needing the agent
// returns without one.
func attached() (*client.Client, C.pmix_status_t) {
	state.mu.Lock()
	defer state.mu.Unlock()
	switch {
	case state.inits == 0:
		return nil, C.PMIX_ERR_INIT
	case state.c == nil:
		return nil, C.PMIX_ERR_UNREACH
	}
	return state.c, C.PMIX_SUCCESS
}

func status(err error) C.pmix_status_t { return C.pmix_status_t(pmix.StatusOf(err)) }

// opCallback adapts an application's op callback to the client's.
func opCallback(cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) func(error) {
	return func(err error) { C.cabi_call_opcb(cbfunc, status(err), cbdata) }
}

//export goPMIx_Init
func goPMIx_Init(proc *C.pmix_proc_t) C.pmix_status_t {
	state.mu.Lock()
	defer state.mu.Unlock()
	rc := C.pmix_status_t(C.PMIX_SUCCESS)
	if state.inits == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), attachTimeout)
		c, err := client.Init(ctx)
		cancel()
		switch s := pmix.StatusOf(err); {
		case err == nil:
			state.c, state.proc, state.singleton = c, c.Proc(), false
		case s == pmix.ErrInit || s == pmix.ErrUnreach:
			// No agent: a singleton, as OpenPMIx makes one, and the
			// status MPI libraries take for "run as a singleton".
			host, _ := os.Hostname()
			state.c, state.singleton = nil, true
			state.proc = pmix.Proc{Nspace: fmt.Sprintf("singleton.%s.%d", host, os.Getpid()), Rank: 0}
			rc = C.PMIX_ERR_UNREACH
		default:
			return C.pmix_status_t(s)
		}
		state.refs = make(map[uint64]bus.ID)
		state.stored = make(map[storedKey]pmix.Value)
		state.connects = make(map[string][]string)
	} else if state.singleton {
		rc = C.PMIX_ERR_UNREACH
	}
	state.inits++
	if proc != nil {
		putProc(proc, state.proc)
	}
	return rc
}

//export goPMIx_Initialized
func goPMIx_Initialized() C.int {
	state.mu.Lock()
	defer state.mu.Unlock()
	if state.inits > 0 {
		return 1
	}
	return 0
}

// goPMIx_Finalize: inHandler is whether the caller is one of the
// application's handlers, which the last Finalize would wait for.
//
//export goPMIx_Finalize
func goPMIx_Finalize(inHandler bool) C.pmix_status_t {
	state.mu.Lock()
	if state.inits == 0 {
		state.mu.Unlock()
		return C.PMIX_ERR_INIT
	}
	if inHandler && state.inits == 1 && state.c != nil {
		state.mu.Unlock()
		return C.PMIX_ERR_WOULD_BLOCK
	}
	state.inits--
	if state.inits > 0 {
		state.mu.Unlock()
		return C.PMIX_SUCCESS
	}
	c := state.c
	state.c, state.refs, state.singleton = nil, nil, false
	state.stored, state.connects = nil, nil
	state.mu.Unlock()
	defer runCleanups()
	if c == nil {
		return C.PMIX_SUCCESS
	}
	// Outside the lock: handlers still running may call in meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), attachTimeout)
	defer cancel()
	return status(c.Finalize(ctx))
}

// abortTimeout bounds PMIx_Abort's request to the agent.
const abortTimeout = 10 * time.Second

// goPMIx_Abort asks the agent to abort the procs named (the caller's whole
// job when none) with client.Abort. For a process its launch service
// started, the agent kills the caller before it answers, and the procs
// named with it; otherwise it raises PMIX_ERR_PROC_REQUESTED_ABORT for the
// caller to its job. Either way, when the caller is among the procs it
// does not return: if it is still alive once the agent answered (or could
// not be asked), it exits with status, as the RM would have ended it. A
// singleton has no one to ask: PMIX_ERR_UNREACH, as OpenPMIx returns when
// not connected.
//
//export goPMIx_Abort
func goPMIx_Abort(st C.int, msg *C.char, procs *C.pmix_proc_t, nprocs C.size_t) C.pmix_status_t {
	state.mu.Lock()
	inits, c, self := state.inits, state.c, state.proc
	state.mu.Unlock()
	switch {
	case inits == 0:
		return C.PMIX_ERR_INIT
	case procs == nil && nprocs > 0:
		return C.PMIX_ERR_BAD_PARAM
	case c == nil:
		return C.PMIX_ERR_UNREACH
	}
	var targets []pmix.Proc
	included := nprocs == 0
	if procs != nil {
		for _, cp := range unsafe.Slice(procs, int(nprocs)) {
			p := goProc(&cp)
			if p.Nspace == "" {
				p.Nspace = self.Nspace
			}
			targets = append(targets, p)
			included = included || p.Matches(self)
		}
	}
	text := ""
	if msg != nil {
		text = C.GoString(msg)
		if len(text) > proto.MaxAbortMessage {
			text = text[:proto.MaxAbortMessage] // the abort counts more than its whole message
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), abortTimeout)
	err := c.Abort(ctx, pmix.Status(st), text, targets)
	cancel()
	if included {
		if st == 0 {
			st = 1 // an abort is no success, as the launcher counts it
		}
		C.cabi_exit(st)
	}
	return status(err)
}

//export goPMIx_Register_event_handler
func goPMIx_Register_event_handler(codes *C.pmix_status_t, ncodes C.size_t, info *C.pmix_info_t, ninfo C.size_t,
	evhdlr C.pmix_notification_fn_t, cbfunc C.pmix_hdlr_reg_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	if evhdlr == nil {
		return C.PMIX_ERR_BAD_PARAM
	}
	var cs []pmix.Status
	if codes != nil {
		for _, c := range unsafe.Slice(codes, int(ncodes)) {
			cs = append(cs, pmix.Status(c))
		}
	}
	gi := goInfos(info, ninfo)
	state.mu.Lock()
	if state.inits == 0 {
		state.mu.Unlock()
		return C.PMIX_ERR_INIT
	}
	c := state.c
	ref := state.nextRef
	state.nextRef++
	state.refs[ref] = pending
	state.mu.Unlock()
	if c == nil {
		// A singleton has no agent to raise events: the registration is
		// kept, and its handler is never called.
		if cbfunc != nil {
			go func() { C.cabi_call_regcb(cbfunc, C.PMIX_SUCCESS, C.size_t(ref), cbdata) }()
			return C.PMIX_SUCCESS
		}
		return C.pmix_status_t(ref)
	}
	h := cHandler(evhdlr, ref)
	record := func(id bus.ID, err error) C.pmix_status_t {
		state.mu.Lock()
		defer state.mu.Unlock()
		if err != nil {
			delete(state.refs, ref)
			return status(err)
		}
		if _, ok := state.refs[ref]; !ok {
			// Deregistered while the registration was on its way.
			c.DeregisterEventHandlerCB(id, func(error) {})
			return C.PMIX_SUCCESS
		}
		state.refs[ref] = id
		return C.PMIX_SUCCESS
	}
	if cbfunc == nil {
		id, err := c.RegisterEventHandler(context.Background(), cs, gi, h)
		if rc := record(id, err); rc != C.PMIX_SUCCESS {
			return rc
		}
		return C.pmix_status_t(ref)
	}
	c.RegisterEventHandlerCB(cs, gi, h, func(id bus.ID, err error) {
		if rc := record(id, err); rc != C.PMIX_SUCCESS {
			C.cabi_call_regcb(cbfunc, rc, failedRef, cbdata)
			return
		}
		C.cabi_call_regcb(cbfunc, C.PMIX_SUCCESS, C.size_t(ref), cbdata)
	})
	return C.PMIX_SUCCESS
}

//export goPMIx_Deregister_event_handler
func goPMIx_Deregister_event_handler(ref C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	state.mu.Lock()
	if state.inits == 0 {
		state.mu.Unlock()
		return C.PMIX_ERR_INIT
	}
	c := state.c
	id, ok := state.refs[uint64(ref)]
	delete(state.refs, uint64(ref))
	state.mu.Unlock()
	if !ok {
		return C.PMIX_ERR_NOT_FOUND
	}
	if c == nil || id == pending {
		// A singleton's, or one whose registration has not completed:
		// that one is dropped when it does.
		if cbfunc != nil {
			go func() { C.cabi_call_opcb(cbfunc, C.PMIX_SUCCESS, cbdata) }()
		}
		return C.PMIX_SUCCESS
	}
	if cbfunc == nil {
		return status(c.DeregisterEventHandler(context.Background(), id))
	}
	c.DeregisterEventHandlerCB(id, opCallback(cbfunc, cbdata))
	return C.PMIX_SUCCESS
}

//export goPMIx_Notify_event
func goPMIx_Notify_event(code C.pmix_status_t, rng C.pmix_data_range_t, info *C.pmix_info_t, ninfo C.size_t,
	cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	c, rc := attached()
	if c == nil {
		return rc
	}
	gi := goInfos(info, ninfo)
	if cbfunc == nil {
		return status(c.NotifyEvent(context.Background(), pmix.Status(code), pmix.Range(rng), gi))
	}
	c.NotifyEventCB(pmix.Status(code), pmix.Range(rng), gi, opCallback(cbfunc, cbdata))
	return C.PMIX_SUCCESS
}

//export goPMIx_Publish
func goPMIx_Publish(info *C.pmix_info_t, ninfo C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	c, rc := attached()
	if c == nil {
		return rc
	}
	gi := goInfos(info, ninfo)
	if cbfunc == nil {
		return status(c.Publish(context.Background(), gi))
	}
	c.PublishCB(gi, opCallback(cbfunc, cbdata))
	return C.PMIX_SUCCESS
}

//export goPMIx_Lookup
func goPMIx_Lookup(data *C.pmix_pdata_t, ndata C.size_t, info *C.pmix_info_t, ninfo C.size_t) C.pmix_status_t {
	if data == nil || ndata == 0 {
		return C.PMIX_ERR_BAD_PARAM
	}
	c, rc := attached()
	if c == nil {
		return rc
	}
	pd := unsafe.Slice(data, int(ndata))
	keys := make([]string, len(pd))
	for i := range pd {
		keys[i] = goString(&pd[i].key[0], len(pd[i].key))
	}
	found, err := c.Lookup(context.Background(), keys, goInfos(info, ninfo))
	fillPData(pd, found)
	return status(err)
}

// fillPData puts each value found into the first entry of pd with its key
// that has none yet. A found key of another cluster's publisher comes with
// its "cluster:nspace" as the proc's nspace.
func fillPData(pd []C.pmix_pdata_t, found []client.PData) {
	filled := make([]bool, len(pd))
	for _, f := range found {
		for i := range pd {
			if filled[i] || goString(&pd[i].key[0], len(pd[i].key)) != f.Key {
				continue
			}
			filled[i] = true
			putProc(&pd[i].proc, f.Proc)
			// Overwritten, not destructed, as OpenPMIx does: the caller
			// may not have constructed the value.
			putValue(&pd[i].value, f.Value)
			break
		}
	}
}

//export goPMIx_Lookup_nb
func goPMIx_Lookup_nb(keys **C.char, info *C.pmix_info_t, ninfo C.size_t, cbfunc C.pmix_lookup_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	c, rc := attached()
	if c == nil {
		return rc
	}
	ks := goStrings(keys)
	if len(ks) == 0 {
		return C.PMIX_ERR_BAD_PARAM
	}
	c.LookupCB(ks, goInfos(info, ninfo), func(found []client.PData, err error) {
		var arr *C.pmix_pdata_t
		if len(found) > 0 {
			arr = (*C.pmix_pdata_t)(C.calloc(C.size_t(len(found)), C.sizeof_pmix_pdata_t))
			pd := unsafe.Slice(arr, len(found))
			for i, f := range found {
				putString(&pd[i].key[0], len(pd[i].key), f.Key)
			}
			fillPData(pd, found)
		}
		C.cabi_call_lookupcb(cbfunc, status(err), arr, C.size_t(len(found)), cbdata)
		C.PMIx_Pdata_free(arr, C.size_t(len(found)))
	})
	return C.PMIX_SUCCESS
}

//export goPMIx_Unpublish
func goPMIx_Unpublish(keys **C.char, info *C.pmix_info_t, ninfo C.size_t, cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	c, rc := attached()
	if c == nil {
		return rc
	}
	ks, gi := goStrings(keys), goInfos(info, ninfo)
	if cbfunc == nil {
		return status(c.Unpublish(context.Background(), ks, gi))
	}
	c.UnpublishCB(ks, gi, opCallback(cbfunc, cbdata))
	return C.PMIX_SUCCESS
}
