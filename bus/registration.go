package bus

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// ID identifies a registration. Ids start at 1, grow by one per successful
// registration and are never reused, even after Deregister. Zero means none.
type ID uint64

// Category is the category a registration falls in by the codes it names
// (RFC0018): chains run single, then multi, then default handlers.
type Category int

const (
	// CategorySingle: registered for exactly one code.
	CategorySingle Category = iota
	// CategoryMulti: registered for several codes.
	CategoryMulti
	// CategoryDefault: registered for no code, so for every code.
	CategoryDefault

	numCategories = 3
)

// String returns "single", "multi" or "default".
func (c Category) String() string {
	switch c {
	case CategorySingle:
		return "single"
	case CategoryMulti:
		return "multi"
	case CategoryDefault:
		return "default"
	}
	return "category(" + strconv.Itoa(int(c)) + ")"
}

func categoryOf(codes []pmix.Status) Category {
	switch len(codes) {
	case 0:
		return CategoryDefault
	case 1:
		return CategorySingle
	}
	return CategoryMulti
}

// Placement is where a registration asked to go (RFC0018).
type Placement int

const (
	// PlacePrepend is the default: first in its category, after a
	// FIRST_IN_CATEGORY handler (PMIX_EVENT_HDLR_PREPEND, or nothing).
	PlacePrepend Placement = iota
	// PlaceAppend: last in its category, before a LAST_IN_CATEGORY
	// handler (PMIX_EVENT_HDLR_APPEND).
	PlaceAppend
	// PlaceFirst: first in every chain it takes part in, whatever its
	// category (PMIX_EVENT_HDLR_FIRST). One per registry.
	PlaceFirst
	// PlaceLast: last in every chain it takes part in (PMIX_EVENT_HDLR_LAST).
	// One per registry.
	PlaceLast
	// PlaceFirstInCategory: first in its category, whatever is registered
	// later (PMIX_EVENT_HDLR_FIRST_IN_CATEGORY). One per category.
	PlaceFirstInCategory
	// PlaceLastInCategory: last in its category, whatever is registered
	// later (PMIX_EVENT_HDLR_LAST_IN_CATEGORY). One per category.
	PlaceLastInCategory
	// PlaceBefore: immediately before the named handler of the same
	// category (PMIX_EVENT_HDLR_BEFORE).
	PlaceBefore
	// PlaceAfter: immediately after the named handler of the same category
	// (PMIX_EVENT_HDLR_AFTER).
	PlaceAfter
)

var placementNames = [...]string{
	PlacePrepend:         "prepend",
	PlaceAppend:          "append",
	PlaceFirst:           "first",
	PlaceLast:            "last",
	PlaceFirstInCategory: "first-in-category",
	PlaceLastInCategory:  "last-in-category",
	PlaceBefore:          "before",
	PlaceAfter:           "after",
}

// String returns a short name: "prepend", "first-in-category", "before" ….
func (p Placement) String() string {
	if p >= 0 && int(p) < len(placementNames) {
		return placementNames[p]
	}
	return "placement(" + strconv.Itoa(int(p)) + ")"
}

// placementKeys maps each placement attribute to what it asks for.
var placementKeys = [...]struct {
	key   string
	place Placement
}{
	{pmix.KeyEventHdlrFirst, PlaceFirst},
	{pmix.KeyEventHdlrLast, PlaceLast},
	{pmix.KeyEventHdlrFirstInCategory, PlaceFirstInCategory},
	{pmix.KeyEventHdlrLastInCategory, PlaceLastInCategory},
	{pmix.KeyEventHdlrBefore, PlaceBefore},
	{pmix.KeyEventHdlrAfter, PlaceAfter},
	{pmix.KeyEventHdlrPrepend, PlacePrepend},
	{pmix.KeyEventHdlrAppend, PlaceAppend},
}

// UnnamedPrefix begins the results key of a handler registered without
// PMIX_EVENT_HDLR_NAME: its entry is keyed "pmixbus.unnamed.<id>". (RFC0002
// allows an empty key there, but an empty key is RFC0018's mark for
// removal.) Names starting with this prefix are refused at registration.
const UnnamedPrefix = "pmixbus.unnamed."

// Registration describes one registered handler, as Registrations and Lookup
// report it. Its slices are copies the caller may keep.
type Registration struct {
	ID       ID
	Name     string        // "" when unnamed
	Codes    []pmix.Status // sorted, without duplicates; nil for the default category
	Category Category

	Placement Placement
	Target    string // the handler named by PlaceBefore / PlaceAfter

	// JobLevel and EnviroLevel are the values of PMIX_EVENT_JOB_LEVEL and
	// PMIX_EVENT_ENVIRO_LEVEL, and JobLevelGiven and EnviroLevelGiven
	// whether each was given at all: an explicit false is not an absent
	// attribute. WantsJob and WantsEnvironment say what they select.
	JobLevel, EnviroLevel           bool
	JobLevelGiven, EnviroLevelGiven bool

	// SourceRange is the receiver-side range filter (PMIX_RANGE given at
	// registration, RFC0018); pmix.RangeUndef means none.
	SourceRange pmix.Range
	// SourceProcs are the accepted sources when SourceRange is
	// pmix.RangeCustom (PMIX_EVENT_CUSTOM_RANGE).
	SourceProcs []pmix.Proc
	// AffectedProcs, when not empty, passes only events whose affected
	// procs (PMIX_EVENT_AFFECTED_PROC/PROCS) include one of them.
	AffectedProcs []pmix.Proc

	// Timeout is PMIX_EVENT_ACTION_TIMEOUT; zero means the registry's
	// DefaultTimeout.
	Timeout time.Duration
}

// Matches reports whether the registration takes part in chains for code:
// the code is one of Codes, or the registration is in the default category.
func (g Registration) Matches(code pmix.Status) bool {
	return g.Category == CategoryDefault || hasCode(g.Codes, code)
}

// WantsJob reports whether the registration takes job events (events
// that target processes, RFC0002): as PMIX_EVENT_JOB_LEVEL says when it is
// given, and otherwise unless PMIX_EVENT_ENVIRO_LEVEL is given true (which
// alone registers "solely for environment events"). See the package
// documentation, Filters.
func (g Registration) WantsJob() bool {
	job, _ := g.levels().takes()
	return job
}

// WantsEnvironment reports whether the registration takes environment
// events with the given code, which tells an agent whether to subscribe to
// them for it: the registration matches code, and PMIX_EVENT_ENVIRO_LEVEL
// was given true (RFC0002: "Default: false"), whatever its category.
func (g Registration) WantsEnvironment(code pmix.Status) bool {
	_, env := g.levels().takes()
	return env && g.Matches(code)
}

func (g Registration) levels() levels {
	return levels{job: g.JobLevel, env: g.EnviroLevel, jobSet: g.JobLevelGiven, envSet: g.EnviroLevelGiven}
}

// Accepts reports whether a chain for ev would invoke this registration in a
// registry whose Config.Self is self: its code matches and every filter
// passes (environment/job level, PMIX_EVENT_NON_DEFAULT, source range,
// affected procs).
func (g Registration) Accepts(ev Event, self Origin) bool {
	if !g.Matches(ev.Code) {
		return false
	}
	v := newEventView(&ev)
	return v.passes(g.Category, &filter{
		levels: g.levels(),
		rng:    g.SourceRange, procs: g.SourceProcs, affected: g.AffectedProcs,
	}, &self)
}

// heldEpoch marks an entry held out of chains.
const heldEpoch = math.MaxUint64

// activeIn reports whether a chain started at epoch includes e.
func (e *entry) activeIn(epoch uint64) bool {
	return !e.removed.Load() && e.activeFrom.Load() <= epoch
}

// entry is a registration inside the registry. Everything but the ordering
// links and removed is immutable once registered, so a chain may read an
// entry without locks.
type entry struct {
	id      ID
	name    string
	key     string // results key: name, or UnnamedPrefix+id
	codes   []pmix.Status
	cat     Category
	place   Placement
	target  string
	filter  filter
	timeout time.Duration
	h       Handler

	removed atomic.Bool // deregistered: running chains skip it
	// activeFrom is the registry epoch from which chains include the
	// entry: 0 for an ordinary registration, heldEpoch while held (see
	// RegisterHeld), the release epoch after Release.
	activeFrom atomic.Uint64

	// Ordering (guarded by Registry.mu). Only entries of a category's
	// labelled middle list use label, prev and next; FIRST, LAST and the
	// FIRST_/LAST_IN_CATEGORY handlers live in slots.
	label      uint64
	prev, next *entry

	waits waitQueue // invocations waiting on h (guarded by Registry.tmu)
}

func (e *entry) matches(code pmix.Status) bool {
	return e.cat == CategoryDefault || hasCode(e.codes, code)
}

func (e *entry) registration() Registration {
	return Registration{
		ID: e.id, Name: e.name, Codes: slices.Clone(e.codes), Category: e.cat,
		Placement: e.place, Target: e.target,
		JobLevel: e.filter.levels.job, EnviroLevel: e.filter.levels.env,
		JobLevelGiven: e.filter.levels.jobSet, EnviroLevelGiven: e.filter.levels.envSet,
		SourceRange: e.filter.rng, SourceProcs: slices.Clone(e.filter.procs),
		AffectedProcs: slices.Clone(e.filter.affected),
		Timeout:       e.timeout,
	}
}

func hasCode(sorted []pmix.Status, code pmix.Status) bool {
	if len(sorted) < 8 {
		return slices.Contains(sorted, code)
	}
	_, ok := slices.BinarySearch(sorted, code)
	return ok
}

// normalizeCodes returns the codes sorted and without duplicates, so that
// [5, 5] is a single-category registration.
func normalizeCodes(codes []pmix.Status) []pmix.Status {
	if len(codes) == 0 {
		return nil
	}
	out := slices.Clone(codes)
	slices.Sort(out)
	return slices.Compact(out)
}

// regName extracts PMIX_EVENT_HDLR_NAME alone, because a duplicate name is an
// error whatever else the registration says (RFC0018).
func regName(info []pmix.Info) (string, error) {
	in, ok := pmix.Lookup(info, pmix.KeyEventHdlrName)
	if !ok {
		return "", nil
	}
	name, isStr := in.Value.Str()
	if !isStr {
		return "", badType(in, "a string")
	}
	if strings.HasPrefix(name, UnnamedPrefix) {
		return "", pmix.Errorf(pmix.ErrBadParam, "handler name %s uses the reserved prefix %q", pmix.Quote(name), UnnamedPrefix)
	}
	return name, nil
}

// parseAttrs reads every registration attribute but the name into e.
// Attributes this package does not know are ignored.
func parseAttrs(e *entry, info []pmix.Info) error {
	seen := make(map[string]bool, len(info))
	var placeKeys []string
	rangeGiven := false
	for _, in := range info {
		if seen[in.Key] {
			switch in.Key {
			case pmix.KeyEventAffectedProc, pmix.KeyEventAffectedProcs:
				// several affected procs may be listed one by one
			default:
				if isRegistrationKey(in.Key) {
					return pmix.Errorf(pmix.ErrBadParam, "attribute %s given twice", in.Key)
				}
			}
		}
		seen[in.Key] = true
		switch in.Key {
		case pmix.KeyEventHdlrFirst, pmix.KeyEventHdlrLast,
			pmix.KeyEventHdlrFirstInCategory, pmix.KeyEventHdlrLastInCategory,
			pmix.KeyEventHdlrPrepend, pmix.KeyEventHdlrAppend:
			on, err := flagValue(in)
			if err != nil {
				return err
			}
			if on {
				placeKeys = append(placeKeys, in.Key)
			}
		case pmix.KeyEventHdlrBefore, pmix.KeyEventHdlrAfter:
			s, ok := in.Value.Str()
			if !ok {
				return badType(in, "a handler name (string)")
			}
			if s == "" {
				return pmix.Errorf(pmix.ErrBadParam, "%s needs a handler name, got an empty string", in.Key)
			}
			e.target = s
			placeKeys = append(placeKeys, in.Key)
		case pmix.KeyEventJobLevel:
			on, err := flagValue(in)
			if err != nil {
				return err
			}
			e.filter.levels.job, e.filter.levels.jobSet = on, true
		case pmix.KeyEventEnviroLevel:
			on, err := flagValue(in)
			if err != nil {
				return err
			}
			e.filter.levels.env, e.filter.levels.envSet = on, true
		case pmix.KeyRange:
			r, err := rangeValue(in)
			if err != nil {
				return err
			}
			e.filter.rng = r
			rangeGiven = true
		case pmix.KeyEventCustomRange:
			ps, err := procsValue(in)
			if err != nil {
				return err
			}
			e.filter.procs = ps
		case pmix.KeyEventAffectedProc, pmix.KeyEventAffectedProcs:
			ps, err := procsValue(in)
			if err != nil {
				return err
			}
			e.filter.affected = append(e.filter.affected, ps...)
		case pmix.KeyEventActionTimeout:
			d, err := timeoutValue(in)
			if err != nil {
				return err
			}
			e.timeout = d
		}
	}

	if job, env := e.filter.levels.takes(); !job && !env {
		return pmix.Errorf(pmix.ErrBadParam, "bus: %s false without %s true takes neither job nor environment events: the handler would receive nothing",
			pmix.KeyEventJobLevel, pmix.KeyEventEnviroLevel)
	}

	switch {
	case len(e.filter.procs) > 0 && !rangeGiven:
		e.filter.rng = pmix.RangeCustom
	case len(e.filter.procs) > 0 && e.filter.rng != pmix.RangeCustom:
		return pmix.Errorf(pmix.ErrBadParam, "%s given with %s %v; it goes with %v", pmix.KeyEventCustomRange, pmix.KeyRange, e.filter.rng, pmix.RangeCustom)
	case e.filter.rng == pmix.RangeCustom && len(e.filter.procs) == 0:
		return pmix.Errorf(pmix.ErrBadParam, "%s %v needs the accepted sources in %s", pmix.KeyRange, pmix.RangeCustom, pmix.KeyEventCustomRange)
	}

	switch len(placeKeys) {
	case 0:
		e.place = PlacePrepend
	case 1:
		for _, pk := range placementKeys {
			if pk.key == placeKeys[0] {
				e.place = pk.place
			}
		}
	default:
		return pmix.Errorf(pmix.ErrEventRegistration, "conflicting placement attributes %s: give at most one", strings.Join(placeKeys, " and "))
	}
	if e.place != PlaceBefore && e.place != PlaceAfter {
		e.target = ""
	}
	return nil
}

func isRegistrationKey(k string) bool {
	switch k {
	case pmix.KeyEventHdlrName, pmix.KeyEventHdlrFirst, pmix.KeyEventHdlrLast,
		pmix.KeyEventHdlrFirstInCategory, pmix.KeyEventHdlrLastInCategory,
		pmix.KeyEventHdlrBefore, pmix.KeyEventHdlrAfter,
		pmix.KeyEventHdlrPrepend, pmix.KeyEventHdlrAppend,
		pmix.KeyEventJobLevel, pmix.KeyEventEnviroLevel,
		pmix.KeyRange, pmix.KeyEventCustomRange, pmix.KeyEventActionTimeout:
		return true
	}
	return false
}

func badType(in pmix.Info, want string) error {
	return pmix.Errorf(pmix.ErrBadParam, "%s must be %s, got %v (%v)", in.Key, want, in.Value.Type(), in.Value)
}

// flagValue reads a flag attribute: a bool, or no value at all (which PMIx
// treats as true).
func flagValue(in pmix.Info) (bool, error) {
	if in.Value.IsUndef() {
		return true, nil
	}
	b, ok := in.Value.Bool()
	if !ok {
		return false, badType(in, "a bool")
	}
	return b, nil
}

// flagSet reports whether a handler's returned info sets a flag; a value of
// another type sets nothing.
func flagSet(in pmix.Info) bool {
	on, err := flagValue(in)
	return err == nil && on
}

func rangeValue(in pmix.Info) (pmix.Range, error) {
	var n int64
	switch in.Value.Type() {
	case pmix.TypeRange, pmix.TypeInt8, pmix.TypeInt16, pmix.TypeInt32, pmix.TypeInt64,
		pmix.TypeUint8, pmix.TypeUint16, pmix.TypeUint32, pmix.TypeUint64:
		var ok bool
		if n, ok = in.Value.Int(); !ok {
			n = -1
		}
	default:
		return 0, badType(in, "a range")
	}
	r := pmix.Range(n)
	if n < 0 || n > math.MaxUint8 || (r != pmix.RangeUndef && !r.Valid()) {
		return 0, pmix.Errorf(pmix.ErrBadParam, "%s %d is not a range (want %d…%d)", in.Key, n, pmix.RangeRM, pmix.RangeProcLocal)
	}
	return r, nil
}

func procsValue(in pmix.Info) ([]pmix.Proc, error) {
	ps, ok := in.Value.Procs()
	if !ok {
		return nil, badType(in, "a proc or a list of procs")
	}
	if len(ps) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "%s is an empty list of procs", in.Key)
	}
	for _, p := range ps {
		if p.IsZero() {
			return nil, pmix.Errorf(pmix.ErrBadParam, "%s lists a proc with no nspace", in.Key)
		}
	}
	return slices.Clone(ps), nil
}

// timeoutValue reads PMIX_EVENT_ACTION_TIMEOUT: an integer number of seconds
// (as PMIx defines it), or a float64 number of seconds, which may be
// fractional.
func timeoutValue(in pmix.Info) (time.Duration, error) {
	const maxSeconds = math.MaxInt64 / int64(time.Second)
	switch in.Value.Type() {
	case pmix.TypeFloat64:
		f, _ := in.Value.Float64()
		if math.IsNaN(f) || f < 0 || f > float64(maxSeconds) {
			return 0, pmix.Errorf(pmix.ErrBadParam, "%s %v is not a duration in seconds", in.Key, f)
		}
		return time.Duration(f * float64(time.Second)), nil
	case pmix.TypeInt8, pmix.TypeInt16, pmix.TypeInt32, pmix.TypeInt64,
		pmix.TypeUint8, pmix.TypeUint16, pmix.TypeUint32, pmix.TypeUint64:
		n, ok := in.Value.Int()
		if !ok || n < 0 || n > maxSeconds {
			return 0, pmix.Errorf(pmix.ErrBadParam, "%s %v is not a duration in seconds", in.Key, in.Value)
		}
		return time.Duration(n) * time.Second, nil
	}
	return 0, badType(in, "a number of seconds (integer or float64)")
}
