package bus

import (
	"cmp"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

// maxCachedPlans bounds the per-code chain cache, so that events with ever
// new codes cannot grow it without limit.
const maxCachedPlans = 4096

// Registry holds the handler registrations of one process (or, in an agent,
// of one local client) and runs their chains. It is safe for concurrent use;
// see the package documentation for the concurrency contract.
type Registry struct {
	self           Origin
	defaultTimeout time.Duration
	log            *slog.Logger
	clock          Clock

	closed atomic.Bool // written under mu
	// epoch counts Release calls; a chain records it when it starts and
	// includes only entries active by then.
	epoch atomic.Uint64

	mu     sync.Mutex
	nextID ID
	byID   map[ID]*entry
	byName map[string]*entry
	first  *entry // PMIX_EVENT_HDLR_FIRST
	last   *entry // PMIX_EVENT_HDLR_LAST
	cats   [numCategories]categoryOrder
	// Entries of the single and multi middle lists by code, to build one
	// code's chain without visiting the handlers of other codes.
	single map[pmix.Status]map[*entry]struct{}
	multi  map[pmix.Status]map[*entry]struct{}
	// plans caches the chain of each code until the next registration
	// change: immutable slices that running chains keep as their snapshot.
	plans  map[pmix.Status][]*entry
	active chain // sentinel of the ring of running chains, for Close

	// Handler timeouts (timeout.go): the registrations whose queue has a
	// timer armed, and whether Close stopped them.
	t0        time.Time
	realClock bool // clock is realClock
	tmu       sync.Mutex
	armed     map[*entry]struct{}
	timersOff bool
}

// categoryOrder is one category's handlers in chain order: head, list, tail.
type categoryOrder struct {
	head *entry // PMIX_EVENT_HDLR_FIRST_IN_CATEGORY
	tail *entry // PMIX_EVENT_HDLR_LAST_IN_CATEGORY
	list orderList
}

// NewRegistry returns an empty registry. It returns an *pmix.Error with
// pmix.ErrBadParam when cfg does not validate.
func NewRegistry(cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Registry{
		self:           cfg.Self,
		defaultTimeout: cfg.DefaultTimeout,
		log:            cfg.Logger,
		clock:          cfg.Clock,
		nextID:         1,
		byID:           make(map[ID]*entry),
		byName:         make(map[string]*entry),
		single:         make(map[pmix.Status]map[*entry]struct{}),
		multi:          make(map[pmix.Status]map[*entry]struct{}),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.clock == nil {
		r.clock = realClock{}
	}
	_, r.realClock = r.clock.(realClock)
	r.t0 = r.clock.Now()
	r.active.prevActive, r.active.nextActive = &r.active, &r.active
	return r, nil
}

// Register adds handler h for codes: one code makes a single-category
// registration, several a multi-category one, none a default one that sees
// every code. Duplicate codes count once. info holds the registration
// attributes (RFC0002, RFC0018):
//
//   - pmix.KeyEventHdlrName (string): unique in the registry; needed for
//     other registrations to name this one in BEFORE/AFTER.
//   - placement, at most one: pmix.KeyEventHdlrFirst, KeyEventHdlrLast,
//     KeyEventHdlrFirstInCategory, KeyEventHdlrLastInCategory,
//     KeyEventHdlrPrepend, KeyEventHdlrAppend (bools), KeyEventHdlrBefore,
//     KeyEventHdlrAfter (string: a handler name). With none, the handler is
//     prepended within its category.
//   - filters: pmix.KeyEventJobLevel, KeyEventEnviroLevel (bools, where
//     false is not the same as absent; see the package documentation,
//     Filters); pmix.KeyRange (the accepted source range) with, for
//     pmix.RangeCustom, pmix.KeyEventCustomRange (the accepted source
//     procs; given alone it implies RangeCustom);
//     pmix.KeyEventAffectedProc / KeyEventAffectedProcs.
//   - pmix.KeyEventActionTimeout: integer seconds, or float64 seconds.
//
// Placement flags count when they are true (or carry no value, which also
// makes a level true). Other keys are ignored.
//
// It returns the new registration's id, or an *pmix.Error with:
// pmix.ErrEventRegistration for a duplicate name (whatever the other
// attributes) or a placement that cannot be honoured (see errors.go);
// pmix.ErrBadParam for a nil handler, a malformed attribute, or levels
// that take no event at all (PMIX_EVENT_JOB_LEVEL false without
// PMIX_EVENT_ENVIRO_LEVEL true); ErrClosed after Close.
//
// Register may be called from inside a handler. It does not change the
// order of chains already running.
func (r *Registry) Register(codes []pmix.Status, info []pmix.Info, h Handler) (ID, error) {
	return r.register(codes, info, h, false)
}

// RegisterHeld is Register for a registration that takes no part in chains
// until Release: its place in the order is fixed now, and its errors are
// Register's, but chains skip it — even chains still running after the
// Release, since they started before it — and Wants ignores it. Replay
// reaches it. An agent uses the window to replay cached events to the new
// registration alone, before any live event, with no event both replayed
// and delivered live.
func (r *Registry) RegisterHeld(codes []pmix.Status, info []pmix.Info, h Handler) (ID, error) {
	return r.register(codes, info, h, true)
}

// Release lets a held registration take part in chains that start from now
// on. Releasing a registration that is not held does nothing.
//
// It returns an *pmix.Error with pmix.ErrNotFound for an unknown id.
func (r *Registry) Release(id ID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byID[id]
	if !ok {
		return pmix.Errorf(pmix.ErrNotFound, "no registration with id %d", id)
	}
	if e.activeFrom.Load() == heldEpoch {
		e.activeFrom.Store(r.epoch.Add(1))
	}
	return nil
}

// ReleaseAt is Release with the epoch the registration is active from
// given by the caller: a stamp from one counter it keeps across registries
// (an agent's router), so that it can later ask any of them for the
// registrations released since a stamp (SnapshotSince). Stamps given to
// one registry must increase; a stamp at or below its epoch is raised to
// the epoch after it. Releasing a registration that is not held does
// nothing.
//
// It returns an *pmix.Error with pmix.ErrNotFound for an unknown id.
func (r *Registry) ReleaseAt(id ID, stamp uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byID[id]
	if !ok {
		return pmix.Errorf(pmix.ErrNotFound, "no registration with id %d", id)
	}
	if e.activeFrom.Load() != heldEpoch {
		return nil
	}
	stamp = max(stamp, r.epoch.Load()+1)
	r.epoch.Store(stamp)
	e.activeFrom.Store(stamp)
	return nil
}

func (r *Registry) register(codes []pmix.Status, info []pmix.Info, h Handler, held bool) (ID, error) {
	if h == nil {
		return 0, pmix.Errorf(pmix.ErrBadParam, "nil handler")
	}
	name, err := regName(info)
	if err != nil {
		return 0, err
	}
	e := &entry{name: name, h: h}
	if held {
		e.activeFrom.Store(heldEpoch)
	}
	e.codes = normalizeCodes(codes)
	e.cat = categoryOf(e.codes)
	// The attributes are parsed before taking the lock; the duplicate-name
	// check, which must win over any other error, is repeated under it.
	attrErr := parseAttrs(e, info)

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return 0, ErrClosed
	}
	if old, dup := r.byName[name]; dup && name != "" {
		return 0, pmix.Errorf(pmix.ErrEventRegistration, "a handler named %s is already registered (id %d)", pmix.Quote(name), old.id)
	}
	if attrErr != nil {
		return 0, attrErr
	}
	if err := r.placeLocked(e); err != nil {
		return 0, err
	}
	e.id = r.nextID
	r.nextID++
	if name == "" {
		e.key = UnnamedPrefix + strconv.FormatUint(uint64(e.id), 10)
	} else {
		e.key = name
		r.byName[name] = e
	}
	r.byID[e.id] = e
	r.plans = nil
	return e.id, nil
}

// placeLocked links e into the order its placement asks for, or reports why
// it cannot.
func (r *Registry) placeLocked(e *entry) error {
	cat := &r.cats[e.cat]
	switch e.place {
	case PlaceFirst:
		if r.first != nil {
			return pmix.Errorf(pmix.ErrEventRegistration, "a FIRST handler is already registered (%s)", r.first.describe())
		}
		r.first = e
		return nil
	case PlaceLast:
		if r.last != nil {
			return pmix.Errorf(pmix.ErrEventRegistration, "a LAST handler is already registered (%s)", r.last.describe())
		}
		r.last = e
		return nil
	case PlaceFirstInCategory:
		if cat.head != nil {
			return pmix.Errorf(pmix.ErrEventRegistration, "the %s category already has a FIRST_IN_CATEGORY handler (%s)", e.cat, cat.head.describe())
		}
		cat.head = e
		return nil
	case PlaceLastInCategory:
		if cat.tail != nil {
			return pmix.Errorf(pmix.ErrEventRegistration, "the %s category already has a LAST_IN_CATEGORY handler (%s)", e.cat, cat.tail.describe())
		}
		cat.tail = e
		return nil
	case PlaceBefore, PlaceAfter:
		return r.placeRelativeLocked(e, cat)
	case PlaceAppend:
		cat.list.pushBack(e)
	default:
		cat.list.pushFront(e)
	}
	r.indexLocked(e)
	return nil
}

// placeRelativeLocked handles BEFORE and AFTER. The target must be named,
// registered, and in e's category. Nothing may go before the FIRST or the
// FIRST_IN_CATEGORY handler, or after the LAST or the LAST_IN_CATEGORY
// handler. After FIRST is the front of the category (behind its
// FIRST_IN_CATEGORY handler, if any); before LAST is the end of the category
// (ahead of its LAST_IN_CATEGORY handler): FIRST and LAST are outside every
// category's list, so that is as near to them as the category goes.
func (r *Registry) placeRelativeLocked(e *entry, cat *categoryOrder) error {
	before := e.place == PlaceBefore
	t, ok := r.byName[e.target]
	if !ok {
		return pmix.Errorf(pmix.ErrEventRegistration, "%s %s: no handler of that name is registered", e.placeKey(), pmix.Quote(e.target))
	}
	if t.cat != e.cat {
		return pmix.Errorf(pmix.ErrEventRegistration, "%s %s: that handler is in the %s category, this one in the %s category", e.placeKey(), pmix.Quote(e.target), t.cat, e.cat)
	}
	switch {
	case t == r.first && before:
		return pmix.Errorf(pmix.ErrEventRegistration, "%s %s: nothing can go before the FIRST handler", e.placeKey(), pmix.Quote(e.target))
	case t == r.last && !before:
		return pmix.Errorf(pmix.ErrEventRegistration, "%s %s: nothing can go after the LAST handler", e.placeKey(), pmix.Quote(e.target))
	case t == cat.head && before:
		return pmix.Errorf(pmix.ErrEventRegistration, "%s %s: nothing can go before the FIRST_IN_CATEGORY handler of the %s category", e.placeKey(), pmix.Quote(e.target), e.cat)
	case t == cat.tail && !before:
		return pmix.Errorf(pmix.ErrEventRegistration, "%s %s: nothing can go after the LAST_IN_CATEGORY handler of the %s category", e.placeKey(), pmix.Quote(e.target), e.cat)
	case t == r.first || t == cat.head: // after it
		cat.list.pushFront(e)
	case t == r.last || t == cat.tail: // before it
		cat.list.pushBack(e)
	case before:
		cat.list.insertBefore(e, t)
	default:
		cat.list.insertAfter(e, t)
	}
	r.indexLocked(e)
	return nil
}

func (e *entry) placeKey() string {
	if e.place == PlaceBefore {
		return pmix.KeyEventHdlrBefore
	}
	return pmix.KeyEventHdlrAfter
}

func (e *entry) describe() string {
	if e.name == "" {
		return "unnamed, id " + strconv.FormatUint(uint64(e.id), 10)
	}
	return pmix.Quote(e.name) + ", id " + strconv.FormatUint(uint64(e.id), 10)
}

// codeIndex is the by-code index of a category's list entries; nil for the
// default category, whose entries match every code.
func (r *Registry) codeIndex(cat Category) map[pmix.Status]map[*entry]struct{} {
	switch cat {
	case CategorySingle:
		return r.single
	case CategoryMulti:
		return r.multi
	}
	return nil
}

// indexLocked records a list entry under its codes.
func (r *Registry) indexLocked(e *entry) {
	idx := r.codeIndex(e.cat)
	if idx == nil {
		return
	}
	for _, c := range e.codes {
		set := idx[c]
		if set == nil {
			set = make(map[*entry]struct{})
			idx[c] = set
		}
		set[e] = struct{}{}
	}
}

func (r *Registry) unindexLocked(e *entry) {
	idx := r.codeIndex(e.cat)
	if idx == nil {
		return
	}
	for _, c := range e.codes {
		delete(idx[c], e)
		if len(idx[c]) == 0 {
			delete(idx, c)
		}
	}
}

// Deregister removes a registration. Deregistering the FIRST, LAST,
// FIRST_IN_CATEGORY or LAST_IN_CATEGORY handler frees its slot, and the name
// becomes free for a new registration; the id is never given out again.
// Running chains skip the handler if they have not reached it yet; an
// invocation already under way may still complete.
//
// It returns an *pmix.Error with pmix.ErrNotFound for an id that is not
// registered. It works after Close too, and may be called from inside a
// handler (a handler may deregister itself).
func (r *Registry) Deregister(id ID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byID[id]
	if !ok {
		return pmix.Errorf(pmix.ErrNotFound, "no registration with id %d", id)
	}
	e.removed.Store(true)
	delete(r.byID, id)
	if e.name != "" {
		delete(r.byName, e.name)
	}
	cat := &r.cats[e.cat]
	switch e {
	case r.first:
		r.first = nil
	case r.last:
		r.last = nil
	case cat.head:
		cat.head = nil
	case cat.tail:
		cat.tail = nil
	default:
		cat.list.remove(e)
		r.unindexLocked(e)
	}
	r.plans = nil
	return nil
}

// Lookup returns the registration with the given id.
func (r *Registry) Lookup(id ID) (Registration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byID[id]
	if !ok {
		return Registration{}, false
	}
	return e.registration(), true
}

// Len returns the number of registrations.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID)
}

// Registrations returns every registration, in the order a chain for a code
// they all matched would run them: FIRST, the single category, the multi
// category, the default category, LAST.
func (r *Registry) Registrations() []Registration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Registration, 0, len(r.byID))
	r.eachLocked(func(e *entry) { out = append(out, e.registration()) })
	return out
}

// eachLocked visits every entry in chain order.
func (r *Registry) eachLocked(f func(*entry)) {
	if r.first != nil {
		f(r.first)
	}
	for c := range r.cats {
		cat := &r.cats[c]
		if cat.head != nil {
			f(cat.head)
		}
		for e := cat.list.front; e != nil; e = e.next {
			f(e)
		}
		if cat.tail != nil {
			f(cat.tail)
		}
	}
	if r.last != nil {
		f(r.last)
	}
}

// planLocked returns the chain for code: every entry that matches it, in
// order, before filtering. The slice is cached until the next registration
// change and never modified, so chains keep it as their snapshot.
func (r *Registry) planLocked(code pmix.Status) []*entry {
	if p, ok := r.plans[code]; ok {
		return p
	}
	var p []*entry
	if r.first != nil && r.first.matches(code) {
		p = append(p, r.first)
	}
	for c := range r.cats {
		cat := &r.cats[c]
		if cat.head != nil && cat.head.matches(code) {
			p = append(p, cat.head)
		}
		switch Category(c) {
		case CategorySingle:
			p = appendByLabel(p, r.single[code])
		case CategoryMulti:
			p = appendByLabel(p, r.multi[code])
		default:
			for e := cat.list.front; e != nil; e = e.next {
				p = append(p, e)
			}
		}
		if cat.tail != nil && cat.tail.matches(code) {
			p = append(p, cat.tail)
		}
	}
	if r.last != nil && r.last.matches(code) {
		p = append(p, r.last)
	}
	if r.plans == nil || len(r.plans) >= maxCachedPlans {
		r.plans = make(map[pmix.Status][]*entry)
	}
	p = slices.Clip(p)
	r.plans[code] = p
	return p
}

func appendByLabel(p []*entry, set map[*entry]struct{}) []*entry {
	start := len(p)
	for e := range set {
		p = append(p, e)
	}
	slices.SortFunc(p[start:], func(a, b *entry) int { return cmp.Compare(a.label, b.label) })
	return p
}

// plan returns the snapshot for code, or ok false after Close.
func (r *Registry) plan(code pmix.Status) (p []*entry, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return nil, false
	}
	return r.planLocked(code), true
}

// Wants reports whether a chain for ev would invoke at least one handler:
// one matches its code and accepts it after filtering. An agent uses it to
// skip a client with nothing to run. It is cheap: a cached lookup and the
// filters of the matching handlers. It returns false after Close.
func (r *Registry) Wants(ev Event) bool {
	p, ok := r.plan(ev.Code)
	if !ok || len(p) == 0 {
		return false
	}
	v := newEventView(&ev)
	epoch := r.epoch.Load()
	for _, e := range p {
		if e.activeIn(epoch) && v.passes(e.cat, &e.filter, &r.self) {
			return true
		}
	}
	return false
}

// Close stops the registry. Chains waiting on a handler end at once with
// what they have, that handler recorded with status pmix.ErrInit, and their
// Outcome's Status is pmix.ErrInit; their timers are stopped. A chain that is
// inside a handler call stops once the call returns. Later Notify calls
// report an Outcome with Status pmix.ErrInit; Register and Replay return
// ErrClosed. Close does not wait for handlers and is safe to call more than
// once.
func (r *Registry) Close() {
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return
	}
	r.closed.Store(true)
	var running []*chain
	for c := r.active.nextActive; c != &r.active; c = c.nextActive {
		running = append(running, c)
	}
	r.plans = nil
	r.mu.Unlock()
	r.stopTimers()
	for _, c := range running {
		c.interrupt()
	}
}
