package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include "cabi.h"
*/
import "C"

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/pmixbus/pmixbus/pmix"
)

// PMIx_Job_control serves the cleanup requests only: files and directories
// the process asks to have removed once it ends (PMIX_REGISTER_CLEANUP,
// PMIX_REGISTER_CLEANUP_DIR, with PMIX_CLEANUP_RECURSIVE, _EMPTY, _IGNORE,
// _LEAVE_TOPDIR). Open MPI 4.1 registers its session directory so at
// MPI_Init and fails the init when the request fails. OpenPMIx's server
// removes them when the client ends; here the process does it itself, at
// its last PMIx_Finalize, after detaching. So only a request for the
// caller itself is taken: one for the whole job (no targets) would have
// to wait for every rank, and is PMIX_ERR_NOT_SUPPORTED, as every other
// job-control request is.

// The cleanup directives' keys.
const (
	keyRegisterCleanup    = "pmix.reg.cleanup"    // string: comma list of files
	keyRegisterCleanupDir = "pmix.reg.cleanupdir" // string: comma list of directories
	keyCleanupRecursive   = "pmix.clnup.recurse"  // bool: the directories' subdirectories too
	keyCleanupEmpty       = "pmix.clnup.empty"    // bool: remove only empty subdirectories
	keyCleanupIgnore      = "pmix.clnup.ignore"   // string: comma list of names to keep
	keyCleanupLeaveTopdir = "pmix.clnup.lvtop"    // bool: keep the registered directories themselves
)

// cleanup is one registration.
type cleanup struct {
	files, dirs                   []string
	recursive, emptyOnly, keepTop bool
	ignore                        []string
}

// cleanups are the registrations of this process, run at its last
// PMIx_Finalize.
var cleanups struct {
	mu   sync.Mutex
	regs []cleanup
}

// goPMIx_Job_control registers a cleanup (see above). jobcontrol.c has
// checked the arrays; cbfunc is nil for the blocking form. Errors:
// PMIX_ERR_INIT before PMIx_Init; PMIX_ERR_NOT_SUPPORTED for any other
// request or target; PMIX_ERR_BAD_PARAM for a path key that is not a
// string, or no path.
//
//export goPMIx_Job_control
func goPMIx_Job_control(targets *C.pmix_proc_t, ntargets C.size_t, info *C.pmix_info_t, ninfo C.size_t,
	cbfunc C.pmix_info_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	state.mu.Lock()
	inits, me := state.inits, state.proc
	state.mu.Unlock()
	if inits == 0 {
		return C.PMIX_ERR_INIT
	}
	if ntargets != 1 {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	t := goProc(targets)
	if (t.Nspace != "" && t.Nspace != me.Nspace) || t.Rank != me.Rank {
		return C.PMIX_ERR_NOT_SUPPORTED
	}
	reg, rc := parseCleanup(goInfos(info, ninfo))
	if rc != C.PMIX_SUCCESS {
		return rc
	}
	cleanups.mu.Lock()
	cleanups.regs = append(cleanups.regs, reg)
	cleanups.mu.Unlock()
	if cbfunc != nil {
		// Never from inside the _nb call (docs/cabi.md).
		go C.cabi_call_infocb(cbfunc, C.PMIX_SUCCESS, cbdata)
	}
	return C.PMIX_SUCCESS
}

// parseCleanup reads a cleanup registration from directives.
func parseCleanup(directives []pmix.Info) (cleanup, C.pmix_status_t) {
	var c cleanup
	for _, in := range directives {
		switch in.Key {
		case keyRegisterCleanup, keyRegisterCleanupDir, keyCleanupIgnore:
			s, ok := in.Value.Str()
			if !ok {
				return c, C.PMIX_ERR_BAD_PARAM
			}
			list := strings.FieldsFunc(s, func(r rune) bool { return r == ',' })
			switch in.Key {
			case keyRegisterCleanup:
				c.files = append(c.files, list...)
			case keyRegisterCleanupDir:
				c.dirs = append(c.dirs, list...)
			default:
				c.ignore = append(c.ignore, list...)
			}
		case keyCleanupRecursive, keyCleanupEmpty, keyCleanupLeaveTopdir:
			b, ok := in.Value.Bool()
			if !ok {
				return c, C.PMIX_ERR_BAD_PARAM
			}
			switch in.Key {
			case keyCleanupRecursive:
				c.recursive = b
			case keyCleanupEmpty:
				c.emptyOnly = b
			default:
				c.keepTop = b
			}
		default:
			return c, C.PMIX_ERR_NOT_SUPPORTED
		}
	}
	if len(c.files) == 0 && len(c.dirs) == 0 {
		return c, C.PMIX_ERR_BAD_PARAM
	}
	return c, C.PMIX_SUCCESS
}

// runCleanups removes what the process registered, and forgets it.
// Failures are ignored: what cannot be removed is left, as OpenPMIx's
// server leaves it.
func runCleanups() {
	cleanups.mu.Lock()
	regs := cleanups.regs
	cleanups.regs = nil
	cleanups.mu.Unlock()
	for _, c := range regs {
		for _, f := range c.files {
			if !slices.Contains(c.ignore, filepath.Base(f)) {
				os.Remove(f)
			}
		}
		for _, d := range c.dirs {
			c.clean(d, true)
		}
	}
}

// clean empties dir as c asks, then removes it unless it is a registered
// directory to keep (top) or still holds something.
func (c cleanup) clean(dir string, top bool) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if slices.Contains(c.ignore, e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir():
			if c.recursive {
				c.clean(p, false)
			}
		case !c.emptyOnly:
			os.Remove(p)
		}
	}
	if !top || !c.keepTop {
		os.Remove(dir) // fails, as it should, when something is left
	}
}
