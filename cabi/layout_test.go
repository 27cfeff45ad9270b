package cabi

import (
	"strings"
	"testing"
)

// wantLayout is research §4.3: OpenPMIx 4.2.2's x86_64 layouts and
// constants, as its sizeof/offsetof probes found them. A program compiled
// against this package's header must print exactly these.
var wantLayout = map[string]string{
	"sizeof(pmix_status_t)":          "4",
	"sizeof(pmix_rank_t)":            "4",
	"sizeof(pmix_data_type_t)":       "2",
	"sizeof(pmix_data_range_t)":      "1",
	"sizeof(pmix_persistence_t)":     "1",
	"sizeof(pmix_scope_t)":           "1",
	"sizeof(pmix_info_directives_t)": "4",

	"sizeof(pmix_proc_t)": "260", "alignof(pmix_proc_t)": "4",
	"offsetof(pmix_proc_t.nspace)": "0", "offsetof(pmix_proc_t.rank)": "256",

	"sizeof(pmix_value_t)": "32", "alignof(pmix_value_t)": "8",
	"offsetof(pmix_value_t.type)": "0", "offsetof(pmix_value_t.data)": "8",
	"sizeof(pmix_value_t.data)": "24",

	"sizeof(pmix_info_t)": "552", "alignof(pmix_info_t)": "8",
	"offsetof(pmix_info_t.key)": "0", "offsetof(pmix_info_t.flags)": "512", "offsetof(pmix_info_t.value)": "520",

	"sizeof(pmix_pdata_t)": "808", "alignof(pmix_pdata_t)": "8",
	"offsetof(pmix_pdata_t.proc)": "0", "offsetof(pmix_pdata_t.key)": "260", "offsetof(pmix_pdata_t.value)": "776",

	"sizeof(pmix_data_array_t)":         "24",
	"offsetof(pmix_data_array_t.type)":  "0",
	"offsetof(pmix_data_array_t.size)":  "8",
	"offsetof(pmix_data_array_t.array)": "16",

	"sizeof(pmix_byte_object_t)":         "16",
	"offsetof(pmix_byte_object_t.bytes)": "0",
	"offsetof(pmix_byte_object_t.size)":  "8",

	"sizeof(pmix_app_t)": "56", "offsetof(pmix_app_t.cmd)": "0", "offsetof(pmix_app_t.argv)": "8",
	"offsetof(pmix_app_t.env)": "16", "offsetof(pmix_app_t.cwd)": "24", "offsetof(pmix_app_t.maxprocs)": "32",
	"offsetof(pmix_app_t.info)": "40", "offsetof(pmix_app_t.ninfo)": "48",

	"sizeof(pmix_envar_t)": "24", // the largest member of pmix_value_t's union

	"PMIX_MAX_NSLEN": "255", "PMIX_MAX_KEYLEN": "511",
	"PMIX_RANK_WILDCARD": "4294967294", "PMIX_RANK_UNDEF": "4294967295", "PMIX_RANK_LOCAL_NODE": "4294967293",
	"PMIX_RANK_INVALID": "4294967292", "PMIX_RANK_LOCAL_PEERS": "4294967291", "PMIX_RANK_VALID": "4294967245",

	"PMIX_BOOL": "1", "PMIX_BYTE": "2", "PMIX_STRING": "3", "PMIX_SIZE": "4", "PMIX_PID": "5", "PMIX_INT": "6",
	"PMIX_INT8": "7", "PMIX_INT16": "8", "PMIX_INT32": "9", "PMIX_INT64": "10", "PMIX_UINT": "11", "PMIX_UINT8": "12",
	"PMIX_UINT16": "13", "PMIX_UINT32": "14", "PMIX_UINT64": "15", "PMIX_FLOAT": "16", "PMIX_DOUBLE": "17",
	"PMIX_TIMEVAL": "18", "PMIX_TIME": "19", "PMIX_STATUS": "20", "PMIX_VALUE": "21", "PMIX_PROC": "22",
	"PMIX_APP": "23", "PMIX_INFO": "24", "PMIX_PDATA": "25", "PMIX_BYTE_OBJECT": "27", "PMIX_KVAL": "28",
	"PMIX_PERSIST": "30", "PMIX_POINTER": "31", "PMIX_SCOPE": "32", "PMIX_DATA_RANGE": "33", "PMIX_COMMAND": "34",
	"PMIX_INFO_DIRECTIVES": "35", "PMIX_DATA_TYPE": "36", "PMIX_PROC_STATE": "37", "PMIX_PROC_INFO": "38",
	"PMIX_DATA_ARRAY": "39", "PMIX_PROC_RANK": "40", "PMIX_QUERY": "41", "PMIX_COMPRESSED_STRING": "42",
	"PMIX_ALLOC_DIRECTIVE": "43", "PMIX_IOF_CHANNEL": "45", "PMIX_ENVAR": "46", "PMIX_COORD": "47",
	"PMIX_REGATTR": "48", "PMIX_REGEX": "49", "PMIX_JOB_STATE": "50", "PMIX_STOR_ACCESS_TYPE": "69",

	"PMIX_INFO_REQD": "1", "PMIX_INFO_ARRAY_END": "2", "PMIX_INFO_REQD_PROCESSED": "4",
	"PMIX_INFO_QUALIFIER": "8", "PMIX_INFO_PERSISTENT": "16",
	"PMIX_SCOPE_UNDEF": "0", "PMIX_LOCAL": "1", "PMIX_REMOTE": "2", "PMIX_GLOBAL": "3", "PMIX_INTERNAL": "4",
	"PMIX_PERSIST_INDEF": "0", "PMIX_PERSIST_FIRST_READ": "1", "PMIX_PERSIST_PROC": "2", "PMIX_PERSIST_APP": "3",
	"PMIX_PERSIST_SESSION": "4",
	"PMIX_RANGE_RM":        "1", "PMIX_RANGE_LOCAL": "2", "PMIX_RANGE_NAMESPACE": "3", "PMIX_RANGE_SESSION": "4",
	"PMIX_RANGE_GLOBAL": "5", "PMIX_RANGE_CUSTOM": "6", "PMIX_RANGE_PROC_LOCAL": "7", "PMIX_RANGE_INVALID": "255",

	"PMIX_ERR_UNREACH": "-25", "PMIX_ERR_NOT_SUPPORTED": "-47", "PMIX_ERR_WOULD_BLOCK": "-15",
	"PMIX_ERR_NOT_FOUND": "-46", "PMIX_ERR_PROC_REQUESTED_ABORT": "-8", "PMIX_EVENT_ACTION_COMPLETE": "-334",
	"PMIX_EXTERNAL_ERR_BASE": "-3000",
}

// TestLayout compiles testdata/layout.c against each header and checks
// every size, offset and constant it prints against research §4.3, so a
// slip in the header's layout is caught.
func TestLayout(t *testing.T) {
	for _, h := range headers(t) {
		t.Run(h.name, func(t *testing.T) {
			bin := compile(t, "layout.c", h, false)
			out := run(t, t.Context(), bin, nil)
			seen := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				name, got, _ := strings.Cut(line, " ")
				want, ok := wantLayout[name]
				if !ok {
					t.Errorf("layout.c prints %s, which the test does not know", name)
					continue
				}
				seen[name] = true
				if got != want {
					t.Errorf("%s = %s, want %s", name, got, want)
				}
			}
			for name := range wantLayout {
				if !seen[name] {
					t.Errorf("layout.c did not print %s", name)
				}
			}
		})
	}
}
