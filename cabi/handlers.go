package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include <stdlib.h>
#include "cabi.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// invocation is one call of an application's C handler that has not
// completed: the C arrays it was given, which live until it calls its
// completion callback, and what to tell the chain then.
type invocation struct {
	call            *bus.Call
	done            bus.Done
	source          *C.pmix_proc_t
	info, results   *C.pmix_info_t
	ninfo, nresults C.size_t
}

// invocations are keyed by a number that travels through C as the
// completion callback's cbdata: C never holds a Go pointer.
var invocations struct {
	mu   sync.Mutex
	next uintptr
	m    map[uintptr]*invocation
}

// cHandler is the bus.Handler that calls evhdlr, the application's handler
// registered as ref.
func cHandler(evhdlr C.pmix_notification_fn_t, ref uint64) bus.Handler {
	return func(call *bus.Call, done bus.Done) {
		inv := &invocation{call: call, done: done}
		inv.source = (*C.pmix_proc_t)(C.calloc(1, C.sizeof_pmix_proc_t))
		putProc(inv.source, call.Source)
		inv.info, inv.ninfo = newCInfos(call.Info)
		inv.results, inv.nresults = newCInfos(call.Results)
		invocations.mu.Lock()
		if invocations.m == nil {
			invocations.m = make(map[uintptr]*invocation)
		}
		invocations.next++
		key := invocations.next
		invocations.m[key] = inv
		invocations.mu.Unlock()
		C.cabi_call_evhdlr(evhdlr, C.size_t(ref), C.pmix_status_t(call.Code), inv.source,
			inv.info, inv.ninfo, inv.results, inv.nresults, C.uintptr_t(key))
	}
}

// goHandlerDone is the handler's completion: it passes the handler's
// status and results on to the chain and frees what the handler was
// given. A second call for the same invocation does nothing.
//
//export goHandlerDone
func goHandlerDone(key C.uintptr_t, st C.pmix_status_t, results *C.pmix_info_t, nresults C.size_t) {
	invocations.mu.Lock()
	inv := invocations.m[uintptr(key)]
	delete(invocations.m, uintptr(key))
	invocations.mu.Unlock()
	if inv == nil {
		return
	}
	added := inv.settle(results, nresults)
	C.PMIx_Info_free(inv.info, inv.ninfo)
	C.PMIx_Info_free(inv.results, inv.nresults)
	C.free(unsafe.Pointer(inv.source))
	inv.done(pmix.Status(st), added)
}

// settle takes the handler's edits to the prior results into call.Results
// (RFC0018: a handler may change them, or free a key to remove its entry)
// and returns the entries it added. C handlers commonly pass back a new
// array holding the prior results followed by their own: an entry whose
// key matches a prior one not yet matched is that one, edited; the others
// are new.
func (inv *invocation) settle(results *C.pmix_info_t, nresults C.size_t) []pmix.Info {
	prior := inv.call.Results
	if inv.results != nil {
		for i, c := range unsafe.Slice(inv.results, int(inv.nresults)) {
			if i >= len(prior) {
				break
			}
			key := goString(&c.key[0], len(c.key))
			if key == "" {
				prior[i].Key = ""
				continue
			}
			if v, ok := goValue(&c.value); ok {
				prior[i].Value = v
			}
		}
	}
	if results == nil || results == inv.results {
		return nil
	}
	matched := make([]bool, len(prior))
	var added []pmix.Info
	for _, r := range goInfos(results, nresults) {
		edit := false
		for i := range prior {
			if !matched[i] && prior[i].Key == r.Key {
				matched[i], edit = true, true
				prior[i].Value = r.Value
				break
			}
		}
		if !edit {
			added = append(added, r)
		}
	}
	return added
}
