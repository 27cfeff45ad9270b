package iof

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// LimitsBucket is the KV bucket, one per cluster, where the agents of a
// job count the bytes its channels used of their limit.
const LimitsBucket = "PMIXBUS_IOF_LIMITS"

// Limit bounds what the stream keeps of one channel (stdout or stderr) of
// one job, across all its processes and agents (PMIX_IOF_CACHE_SIZE).
type Limit struct {
	// Bytes is the limit; 0 means DefaultLimit.
	Bytes int64
	// DropOldest keeps the newest Bytes, dropping the oldest output
	// (PMIX_IOF_DROP_OLDEST); the default drops what comes after the
	// limit (PMIX_IOF_DROP_NEWEST).
	DropOldest bool
}

func (l Limit) validate() error {
	if l.Bytes < 0 || l.Bytes > MaxLimit {
		return pmix.Errorf(pmix.ErrBadParam, "iof: output limit %d bytes: want 1 to %d", l.Bytes, MaxLimit)
	}
	return nil
}

func (l Limit) bytes() int64 {
	if l.Bytes == 0 {
		return DefaultLimit
	}
	return l.Bytes
}

// block is how much an agent reserves of a limit at a time: few KV updates
// for a big job, and little of the limit stranded in agents that reserved
// and wrote no more.
func (l Limit) block() int64 {
	return min(max(l.bytes()/64, 1024), 256<<10)
}

type budgetKey struct {
	nspace string
	ch     Channel
}

// budget is this agent's share of a job channel's limit. The shared count
// is a KV entry updated with compare-and-set: an agent reserves a block,
// writes records against it, and reserves again; the agent whose update
// crosses the limit first is the one that warns, so a job gets one
// warning, not one per process or agent (Flux #5992).
type budget struct {
	svc   *Service
	key   string
	ns    string
	ch    Channel
	limit Limit
	refs  int

	mu        sync.Mutex
	local     int64 // reserved and not yet written
	exhausted bool  // DROP_NEWEST: the limit is reached, drop without asking
}

// usage is a budget's KV value.
type usage struct {
	Used   int64       `json:"used"`
	Warned bool        `json:"warned,omitempty"`
	Blocks []usedBlock `json:"blocks,omitempty"` // DROP_OLDEST: the reservations kept, oldest first
}

// usedBlock is a reservation and the stream sequence at which it was made:
// output before a kept block's start may be purged.
type usedBlock struct {
	Seq   uint64 `json:"seq"`
	Bytes int64  `json:"n"`
}

// budgetFor returns the job channel's budget, shared by the job's sources
// on this agent. s.mu is held.
func (s *Service) budgetFor(nspace string, ch Channel, l Limit) *budget {
	k := budgetKey{nspace, ch}
	b := s.budgets[k]
	if b == nil {
		b = &budget{svc: s, key: subjects.EscapeToken(nspace) + "." + channelToken(ch), ns: nspace, ch: ch, limit: l}
		s.budgets[k] = b
	}
	b.refs++
	return b
}

func (s *Service) releaseBudget(b *budget) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.refs--; b.refs == 0 {
		delete(s.budgets, budgetKey{b.ns, b.ch})
	}
}

// take says whether n more bytes may be stored.
func (b *budget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.local >= int64(n) {
		b.local -= int64(n)
		return true
	}
	if b.exhausted {
		return false
	}
	want := max(b.limit.block(), int64(n)-b.local)
	granted, err := b.reserve(want)
	if err != nil {
		// The count is unreachable: keep the output rather than lose it.
		b.svc.log.Warn("counting a job's output against its limit", "nspace", b.ns, "channel", b.ch, "err", err)
		return true
	}
	b.local += granted
	if b.local >= int64(n) {
		b.local -= int64(n)
		return true
	}
	b.exhausted = true
	return false
}

// reserve adds want to the shared count and returns what this agent may
// write: want, or under DROP_NEWEST what is left of the limit.
func (b *budget) reserve(want int64) (int64, error) {
	ctx, cancel := context.WithTimeout(b.svc.ctx, 5*time.Second)
	defer cancel()
	limit := b.limit.bytes()
	for range 100 {
		var u usage
		var rev uint64
		e, err := b.svc.limits.Get(ctx, b.key)
		switch {
		case err == nil:
			if err := json.Unmarshal(e.Value(), &u); err != nil {
				return 0, fmt.Errorf("the count %s does not parse: %v", b.key, err)
			}
			rev = e.Revision()
		case !errors.Is(err, natsjs.ErrKeyNotFound):
			return 0, err
		}
		granted, purgeTo := want, uint64(0)
		warn := false
		if b.limit.DropOldest {
			u.Used += want
			u.Blocks = append(u.Blocks, usedBlock{Seq: b.svc.lastSeq.Load() + 1, Bytes: want})
			kept := int64(0)
			for _, bl := range u.Blocks {
				kept += bl.Bytes
			}
			for len(u.Blocks) > 1 && kept-u.Blocks[0].Bytes >= limit { // keep at least the limit
				kept -= u.Blocks[0].Bytes
				u.Blocks = u.Blocks[1:]
				purgeTo = u.Blocks[0].Seq
			}
			warn = u.Used > limit && !u.Warned
		} else {
			granted = max(0, min(want, limit-u.Used))
			u.Used += granted
			warn = granted < want && !u.Warned
		}
		u.Warned = u.Warned || warn
		v, _ := json.Marshal(u)
		if rev == 0 {
			_, err = b.svc.limits.Create(ctx, b.key, v)
		} else {
			_, err = b.svc.limits.Update(ctx, b.key, v, rev)
		}
		if errors.Is(err, natsjs.ErrKeyExists) { // also a revision mismatch: another agent counted first
			continue
		}
		if err != nil {
			return 0, err
		}
		if purgeTo > 0 {
			if err := b.svc.stream.Purge(ctx, natsjs.WithPurgeSubject(ChannelFilter(b.svc.cfg.Cluster, b.ns, b.ch)), natsjs.WithPurgeSequence(purgeTo)); err != nil {
				b.svc.log.Warn("dropping a job's oldest output", "nspace", b.ns, "channel", b.ch, "err", err)
			}
		}
		if warn {
			b.warn(ctx, limit)
		}
		return granted, nil
	}
	return 0, errors.New("the count is contended")
}

// warn records the job's one truncation warning.
func (b *budget) warn(ctx context.Context, limit int64) {
	what := "later output is not kept (PMIX_IOF_DROP_NEWEST): who watches now sees it, a later attach does not"
	if b.limit.DropOldest {
		what = "its oldest output is dropped (PMIX_IOF_DROP_OLDEST)"
	}
	text := fmt.Sprintf("pmixbus: the %s of job %s reached its limit of %s: %s; raise it with --iof-limit (at most %s)\n",
		b.ch, b.ns, formatBytes(limit), what, formatBytes(MaxLimit))
	if err := b.svc.JobRecord(ctx, b.ns, JobDiag, []byte(text)); err != nil {
		b.svc.log.Warn("recording a job's output truncation", "nspace", b.ns, "err", err)
	}
}

// formatBytes prints a size the way the limits are given: 10 MiB, 1 GiB.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ParseSize reads a byte count as the limits are given: a number of bytes,
// or one followed by KiB, MiB or GiB (or k, M, G, KB, MB, GB, all powers
// of 1024).
//
// Errors: pmix.ErrBadParam for anything else.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRightFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	unit := strings.ToLower(strings.TrimSpace(t[len(num):]))
	mult := map[string]float64{"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}[unit]
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || n < 0 || n*mult > 1<<62 {
		return 0, pmix.Errorf(pmix.ErrBadParam, "size %s: want a number of bytes, or one with KiB, MiB or GiB", pmix.Quote(s))
	}
	return int64(n * mult), nil
}
