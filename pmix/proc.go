package pmix

import (
	"cmp"
	"math"
	"strconv"
	"strings"
)

// Range is a PMIx data range (pmix_data_range_t): who an event, or published
// data, is meant for.
type Range uint8

// Ranges, with OpenPMIx's values.
const (
	RangeUndef     Range = 0
	RangeRM        Range = 1 // the host resource manager
	RangeLocal     Range = 2 // procs on the local node
	RangeNamespace Range = 3 // procs in the same nspace
	RangeSession   Range = 4 // procs in the same session
	RangeGlobal    Range = 5 // every proc, across clusters
	RangeCustom    Range = 6 // the procs listed under KeyEventCustomRange
	RangeProcLocal Range = 7 // the calling process only (RFC0018)
	RangeInvalid   Range = math.MaxUint8
)

var rangeNames = [...]string{
	RangeUndef:     "PMIX_RANGE_UNDEF",
	RangeRM:        "PMIX_RANGE_RM",
	RangeLocal:     "PMIX_RANGE_LOCAL",
	RangeNamespace: "PMIX_RANGE_NAMESPACE",
	RangeSession:   "PMIX_RANGE_SESSION",
	RangeGlobal:    "PMIX_RANGE_GLOBAL",
	RangeCustom:    "PMIX_RANGE_CUSTOM",
	RangeProcLocal: "PMIX_RANGE_PROC_LOCAL",
}

// String returns the PMIx name, e.g. "PMIX_RANGE_SESSION".
func (r Range) String() string {
	if int(r) < len(rangeNames) {
		return rangeNames[r]
	}
	if r == RangeInvalid {
		return "PMIX_RANGE_INVALID"
	}
	return "PMIX_RANGE(" + strconv.Itoa(int(r)) + ")"
}

// Valid reports whether r is one of RM … PROC_LOCAL.
func (r Range) Valid() bool { return r >= RangeRM && r <= RangeProcLocal }

// ParseRange accepts "PMIX_RANGE_SESSION", "session" (any case), "proc_local"
// or "proc-local", or the number. It returns ErrBadParam otherwise.
func ParseRange(s string) (Range, error) {
	return parseEnum(s, "PMIX_RANGE_", rangeNames[:], "range", RangeRM, RangeProcLocal, func(i int) Range { return Range(i) })
}

// Persistence is how long published data lives (pmix_persistence_t).
type Persistence uint8

// Persistence policies, with OpenPMIx's values.
const (
	PersistIndef     Persistence = 0 // until unpublished
	PersistFirstRead Persistence = 1 // removed by the first lookup
	PersistProc      Persistence = 2 // until the publisher terminates
	PersistApp       Persistence = 3 // until the job terminates
	PersistSession   Persistence = 4 // until the session terminates
	PersistInvalid   Persistence = math.MaxUint8
)

var persistNames = [...]string{
	PersistIndef:     "PMIX_PERSIST_INDEF",
	PersistFirstRead: "PMIX_PERSIST_FIRST_READ",
	PersistProc:      "PMIX_PERSIST_PROC",
	PersistApp:       "PMIX_PERSIST_APP",
	PersistSession:   "PMIX_PERSIST_SESSION",
}

// String returns the PMIx name, e.g. "PMIX_PERSIST_APP".
func (p Persistence) String() string {
	if int(p) < len(persistNames) {
		return persistNames[p]
	}
	if p == PersistInvalid {
		return "PMIX_PERSIST_INVALID"
	}
	return "PMIX_PERSIST(" + strconv.Itoa(int(p)) + ")"
}

// Valid reports whether p is one of INDEF … SESSION.
func (p Persistence) Valid() bool { return p <= PersistSession }

// ParsePersistence accepts "PMIX_PERSIST_APP", "app", "first_read", "indef"
// or the number. It returns ErrBadParam otherwise.
func ParsePersistence(s string) (Persistence, error) {
	return parseEnum(s, "PMIX_PERSIST_", persistNames[:], "persistence", PersistIndef, PersistSession, func(i int) Persistence { return Persistence(i) })
}

func parseEnum[T ~uint8](s, prefix string, names []string, what string, lo, hi T, mk func(int) T) (T, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.Atoi(t); err == nil {
		if n >= int(lo) && n <= int(hi) {
			return mk(n), nil
		}
		return 0, Errorf(ErrBadParam, "%s %d out of range [%d, %d]", what, n, lo, hi)
	}
	u := strings.ToUpper(strings.ReplaceAll(t, "-", "_"))
	if !strings.HasPrefix(u, prefix) {
		u = prefix + u
	}
	for i := int(lo); i <= int(hi); i++ {
		if names[i] == u {
			return mk(i), nil
		}
	}
	var want []string
	for i := int(lo); i <= int(hi); i++ {
		want = append(want, strings.ToLower(strings.TrimPrefix(names[i], prefix)))
	}
	return 0, Errorf(ErrBadParam, "unknown %s %s: want one of %s", what, Quote(s), strings.Join(want, ", "))
}

// Rank is a process rank within an nspace (pmix_rank_t).
type Rank uint32

// Special ranks, with OpenPMIx's values.
const (
	RankUndef    Rank = math.MaxUint32     // no rank: the RM as a source, a value for no particular rank
	RankWildcard Rank = math.MaxUint32 - 1 // every rank of the nspace
	RankInvalid  Rank = math.MaxUint32 - 3
	// RankValidMax bounds real ranks: r < RankValidMax (PMIX_RANK_VALID).
	RankValidMax Rank = math.MaxUint32 - 50
)

// String prints a real rank as its number, and the special ranks by name.
func (r Rank) String() string {
	switch r {
	case RankUndef:
		return "undef"
	case RankWildcard:
		return "*"
	case RankInvalid:
		return "invalid"
	}
	return strconv.FormatUint(uint64(r), 10)
}

// Valid reports whether r is a real rank (not one of the special values).
func (r Rank) Valid() bool { return r < RankValidMax }

// ParseRank accepts a number, "*" or "wildcard", and "undef".
func ParseRank(s string) (Rank, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "*", "wildcard":
		return RankWildcard, nil
	case "undef":
		return RankUndef, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil || !Rank(n).Valid() {
		return 0, Errorf(ErrBadParam, "invalid rank %s: want a number below %d, '*' or 'undef'", Quote(s), RankValidMax)
	}
	return Rank(n), nil
}

// MaxNspaceLen is PMIX_MAX_NSLEN: an nspace holds at most this many bytes.
const MaxNspaceLen = 255

// Proc identifies a process: its nspace and rank (pmix_proc_t). An nspace
// that crosses clusters is qualified as "cluster:nspace" (RFC0003; see
// package cluster).
type Proc struct {
	Nspace string
	Rank   Rank
}

// String formats p as "nspace.rank" ("job1.3", "job1.*").
func (p Proc) String() string {
	if p.Nspace == "" && p.Rank == RankUndef {
		return "<none>"
	}
	return p.Nspace + "." + p.Rank.String()
}

// IsZero reports whether p is the empty proc: no nspace.
func (p Proc) IsZero() bool { return p.Nspace == "" }

// Matches reports whether p and q name the same process, treating
// RankWildcard on either side as any rank of the nspace
// (PMIX_CHECK_PROCID).
func (p Proc) Matches(q Proc) bool {
	return p.Nspace == q.Nspace && (p.Rank == q.Rank || p.Rank == RankWildcard || q.Rank == RankWildcard)
}

// ParseProc parses "nspace.rank" as printed by String; the rank is after
// the last '.', so an nspace may itself contain dots.
func ParseProc(s string) (Proc, error) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 {
		return Proc{}, Errorf(ErrBadParam, "invalid proc %s: want nspace.rank", Quote(s))
	}
	r, err := ParseRank(s[i+1:])
	if err != nil {
		return Proc{}, Errorf(ErrBadParam, "invalid proc %s: %v", Quote(s), err)
	}
	return Proc{Nspace: s[:i], Rank: r}, nil
}

// CompareProcs orders procs by nspace, then rank: for sorting and
// searching sets of procs.
func CompareProcs(a, b Proc) int {
	return cmp.Or(strings.Compare(a.Nspace, b.Nspace), cmp.Compare(a.Rank, b.Rank))
}
