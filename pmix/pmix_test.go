package pmix

import (
	"errors"
	"fmt"
	"testing"
)

func TestStatusString(t *testing.T) {
	cases := []struct {
		s    Status
		want string
		num  int32
	}{
		{ErrEventRegistration, "PMIX_ERR_EVENT_REGISTRATION", -144},
		{EventNoActionTaken, "PMIX_EVENT_NO_ACTION_TAKEN", -331},
		{EventActionComplete, "PMIX_EVENT_ACTION_COMPLETE", -334},
		{ErrDuplicateKey, "PMIX_ERR_DUPLICATE_KEY", -53},
		{ErrNotFound, "PMIX_ERR_NOT_FOUND", -46},
		{ErrTimeout, "PMIX_ERR_TIMEOUT", -24},
		{ErrUnreach, "PMIX_ERR_UNREACH", -25},
		{ErrBadParam, "PMIX_ERR_BAD_PARAM", -27},
		{ErrLostConnection, "PMIX_ERR_LOST_CONNECTION", -61},
		{ErrCommFailure, "PMIX_ERR_COMM_FAILURE", -49},
		{ErrNoPermissions, "PMIX_ERR_NO_PERMISSIONS", -23},
		{ErrPartialSuccess, "PMIX_ERR_PARTIAL_SUCCESS", -52},
		{ErrInvalidOperation, "PMIX_ERR_INVALID_OPERATION", -158},
		{EventProcTerminated, "PMIX_EVENT_PROC_TERMINATED", -201},
		{EventJobEnd, "PMIX_EVENT_JOB_END", -145},
		{EventNodeDown, "PMIX_EVENT_NODE_DOWN", -231},
		{ErrProcTermWOSync, "PMIX_ERR_PROC_TERM_WO_SYNC", -200},
		{ProcHasConnected, "PMIX_PROC_HAS_CONNECTED", -149},
		{ConnectRequested, "PMIX_CONNECT_REQUESTED", -150},
		{ExternalErrBase, "PMIX_EXTERNAL_ERR_BASE", -3000},
		{Success, "PMIX_SUCCESS", 0},
		{Status(-3001), "PMIX_STATUS(-3001)", -3001},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			if got := c.s.String(); got != c.want {
				t.Errorf("String() = %q", got)
			}
			if int32(c.s) != c.num {
				t.Errorf("value %d, OpenPMIx has %d", c.s, c.num)
			}
			back, err := ParseStatus(c.want)
			if err != nil || back != c.s {
				t.Errorf("ParseStatus(%q) = %v, %v", c.want, back, err)
			}
		})
	}
}

func TestPmixbusStatusesCollideWithNone(t *testing.T) {
	seen := map[string]bool{}
	for s, n := range statusNames {
		if seen[n] {
			t.Errorf("name %s used twice", n)
		}
		seen[n] = true
		_ = s
	}
	for _, s := range []Status{ProcHasDisconnected, ErrConnectEarlyTerm, EventCacheEvicted} {
		if s > -2900 || s <= ExternalErrBase {
			t.Errorf("%v (%d) outside pmixbus's block", s, s)
		}
	}
}

func TestParseStatusForms(t *testing.T) {
	for in, want := range map[string]Status{
		"event_node_down": EventNodeDown, "-231": EventNodeDown, " PMIX_ERR_TIMEOUT ": ErrTimeout,
		"-3005": Status(-3005), "PMIX_STATUS(-3005)": Status(-3005), "event_cache_evicted": EventCacheEvicted,
	} {
		got, err := ParseStatus(in)
		if err != nil || got != want {
			t.Errorf("ParseStatus(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseStatus("node-exploded"); !errors.Is(err, ErrBadParam) {
		t.Errorf("unknown name: %v", err)
	}
}

func TestErrorsIs(t *testing.T) {
	e := Errorf(ErrDuplicateKey, "key %q exists", "x")
	wrapped := fmt.Errorf("publish: %w", e)
	cases := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"status target", e, ErrDuplicateKey, true},
		{"wrapped", wrapped, ErrDuplicateKey, true},
		{"other status", e, ErrNotFound, false},
		{"error target", wrapped, NewError(ErrDuplicateKey, "different text"), true},
		{"bare status", fmt.Errorf("x: %w", ErrTimeout), ErrTimeout, true},
		{"bare status vs *Error target", ErrTimeout, NewError(ErrTimeout, ""), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errors.Is(c.err, c.target); got != c.want {
				t.Errorf("errors.Is = %v", got)
			}
		})
	}
	if StatusOf(wrapped) != ErrDuplicateKey || StatusOf(nil) != Success || StatusOf(errors.New("x")) != ErrGeneral {
		t.Error("StatusOf")
	}
	if StatusOf(fmt.Errorf("ctx: %w", ErrUnreach)) != ErrUnreach {
		t.Error("StatusOf bare status")
	}
	if Success.AsError() != nil || !errors.Is(ErrNotFound.AsError(), ErrNotFound) {
		t.Error("AsError")
	}
	if got := e.Error(); got != `key "x" exists (PMIX_ERR_DUPLICATE_KEY)` {
		t.Errorf("message %q", got)
	}
	inner := errors.New("disk full")
	if w := Errorf(ErrOutOfResource, "store: %w", inner); !errors.Is(w, inner) {
		t.Error("Errorf lost the wrapped error")
	}
}

func TestRangeAndPersistence(t *testing.T) {
	want := map[Range]uint8{RangeRM: 1, RangeLocal: 2, RangeNamespace: 3, RangeSession: 4, RangeGlobal: 5, RangeCustom: 6, RangeProcLocal: 7, RangeInvalid: 255}
	for r, n := range want {
		if uint8(r) != n {
			t.Errorf("%v = %d, want %d", r, r, n)
		}
	}
	for in, r := range map[string]Range{"session": RangeSession, "PMIX_RANGE_GLOBAL": RangeGlobal, "proc-local": RangeProcLocal, "6": RangeCustom, "NameSpace": RangeNamespace} {
		got, err := ParseRange(in)
		if err != nil || got != r {
			t.Errorf("ParseRange(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"galaxy", "0", "8", ""} {
		if _, err := ParseRange(bad); !errors.Is(err, ErrBadParam) {
			t.Errorf("ParseRange(%q) accepted: %v", bad, err)
		}
	}
	for in, p := range map[string]Persistence{"first_read": PersistFirstRead, "indef": PersistIndef, "PMIX_PERSIST_SESSION": PersistSession} {
		got, err := ParsePersistence(in)
		if err != nil || got != p {
			t.Errorf("ParsePersistence(%q) = %v, %v", in, got, err)
		}
	}
	if RangeSession.String() != "PMIX_RANGE_SESSION" || PersistApp.String() != "PMIX_PERSIST_APP" || Range(9).String() != "PMIX_RANGE(9)" {
		t.Error("names")
	}
}

func TestRankAndProc(t *testing.T) {
	if RankWildcard != 1<<32-2 || RankUndef != 1<<32-1 {
		t.Fatal("special ranks differ from OpenPMIx")
	}
	cases := []struct {
		in   string
		want Proc
		ok   bool
	}{
		{"job1.3", Proc{"job1", 3}, true},
		{"A:job.with.dots.*", Proc{"A:job.with.dots", RankWildcard}, true},
		{"ns.undef", Proc{"ns", RankUndef}, true},
		{"nodot", Proc{}, false},
		{".3", Proc{}, false},
		{"ns.-1", Proc{}, false},
		{"ns.4294967294", Proc{}, false},
	}
	for _, c := range cases {
		got, err := ParseProc(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseProc(%q) = %v, %v", c.in, got, err)
		}
		if c.ok && got.String() != c.in {
			t.Errorf("String() = %q, want %q", got.String(), c.in)
		}
	}
	if !(Proc{"a", RankWildcard}).Matches(Proc{"a", 5}) || (Proc{"a", 1}).Matches(Proc{"a", 2}) || (Proc{"a", 1}).Matches(Proc{"b", 1}) {
		t.Error("Matches")
	}
}

func TestInfoHelpers(t *testing.T) {
	infos := []Info{
		NewInfo(KeyEventHdlrName, String("h")),
		NewInfo(KeyEventHdlrFirst, Bool(true)),
		NewInfo(KeyEventHdlrLast, Bool(false)),
		{Key: KeyEventNonDefault},
	}
	if !Flag(infos, KeyEventHdlrFirst) || Flag(infos, KeyEventHdlrLast) || Flag(infos, "absent") || !Flag(infos, KeyEventNonDefault) {
		t.Error("Flag")
	}
	if v, ok := LookupValue(infos, KeyEventHdlrName); !ok || v.String() != `"h"` {
		t.Error("LookupValue")
	}
	if _, ok := String("x").Bool(); ok {
		t.Error("accessor ignored the type")
	}
	if n, ok := Uint32(7).Int(); !ok || n != 7 {
		t.Error("Int")
	}
	if _, ok := Uint64(1 << 63).Int(); ok {
		t.Error("Int overflow")
	}
}
