package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include "cabi.h"
*/
import "C"

import (
	"context"
	"unsafe"
)

// PMIx_Log and PMIx_Log_nb (log.c) over client.Log: the agent stores the
// messages in the job's output, and a help message (PMIX_LOG_KEY and
// PMIX_LOG_VAL) reaches the launcher's aggregation, as Open MPI's and
// PRRTE's show_help send it. The agent checks the data and directives;
// log.c has checked that there is data. A singleton has no launcher to
// show them: PMIX_ERR_UNREACH, as OpenPMIx returns when not connected,
// and Open MPI then prints the message itself.

//export goPMIx_Log
func goPMIx_Log(data *C.pmix_info_t, ndata C.size_t, directives *C.pmix_info_t, ndirs C.size_t,
	cbfunc C.pmix_op_cbfunc_t, cbdata unsafe.Pointer) C.pmix_status_t {
	c, rc := attached()
	if c == nil {
		return rc
	}
	gd, gi := goInfos(data, ndata), goInfos(directives, ndirs)
	if cbfunc == nil {
		return status(c.Log(context.Background(), gd, gi))
	}
	c.LogCB(gd, gi, opCallback(cbfunc, cbdata))
	return C.PMIX_SUCCESS
}
