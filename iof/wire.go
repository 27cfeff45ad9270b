package iof

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// StreamName is the JetStream stream that holds the output of every job of
// a cluster, one per JetStream domain (a cluster is a domain) as the jobs
// and agents buckets are: a literal name lets the launcher and watch keys be
// allowed exactly this stream's consumer API.
const StreamName = "PMIXBUS_IOF"

// Prefix roots the output subjects:
//
//	pmix.iof.<cluster>.<nspace>.<rank>.<out|err|diag>        a process's channel
//	pmix.iof.<cluster>.<nspace>.<rank>.<out|err>.live        over the job's limit: sent, not kept
//	pmix.iof.<cluster>.<nspace>.job.<meta|diag>              the job's own records
//
// Cluster and nspace are escaped tokens (package subjects).
const Prefix = "pmix.iof"

// The subject token of each output channel, and of a job's own records.
const (
	tokenOut  = "out"
	tokenErr  = "err"
	tokenDiag = "diag"
	tokenJob  = "job"
	// tokenLive ends the subject of a record over its job's limit: sent
	// to whoever watches, not kept (the stream takes six tokens only).
	tokenLive = "live"
)

// Job-level record kinds (JobRecord.Kind), the last token of their subject.
const (
	// JobMeta is written by the launcher before any rank starts: the job's
	// size, so a viewer knows how many ranks' ends to wait for.
	JobMeta = "meta"
	// JobDiag is a diagnostic about the whole job from an agent (the
	// truncation warning), not from one of its processes.
	JobDiag = "diag"
	// JobEnd is written by the launcher once every rank has ended.
	JobEnd = "end"
)

// Headers of a record message. Everything else is in the subject, and the
// body is the bytes, untouched.
const (
	// HeaderSeq is the record's sequence in its (process, channel), from 1.
	HeaderSeq = "Pmix-Seq"
	// HeaderTime is when the source agent read the bytes, in nanoseconds
	// since the Unix epoch.
	HeaderTime = "Pmix-Time"
	// HeaderComplete, "true", marks the last record of a channel
	// (PMIX_IOF_COMPLETE).
	HeaderComplete = "Pmix-Complete"
	// HeaderHelpFile and HeaderHelpTopic mark a diag record that is a help
	// message (orte_show_help, PMIx_Log with PMIX_LOG_AGG): the launcher
	// aggregates its duplicates.
	HeaderHelpFile  = "Pmix-Help-File"
	HeaderHelpTopic = "Pmix-Help-Topic"
)

// MaxRecord is the most bytes one record carries: OpenPMIx's
// PMIX_IOF_BASE_MSG_MAX. A longer line is cut into records of this size.
const MaxRecord = 8192

// Subject is where a process's channel is recorded. ch must be STDOUT,
// STDERR or STDDIAG.
func Subject(cluster, nspace string, rank pmix.Rank, ch Channel) string {
	return Prefix + "." + subjects.EscapeToken(cluster) + "." + subjects.EscapeToken(nspace) + "." + rank.String() + "." + channelToken(ch)
}

// JobSubject is where a job's own record of kind (JobMeta, JobDiag,
// JobEnd) is.
func JobSubject(cluster, nspace, kind string) string {
	return Prefix + "." + subjects.EscapeToken(cluster) + "." + subjects.EscapeToken(nspace) + "." + tokenJob + "." + kind
}

// JobFilter matches every record of a job, its processes' and its own.
func JobFilter(cluster, nspace string) string {
	return Prefix + "." + subjects.EscapeToken(cluster) + "." + subjects.EscapeToken(nspace) + ".>"
}

// ChannelFilter matches one channel of every process of a job.
func ChannelFilter(cluster, nspace string, ch Channel) string {
	return Prefix + "." + subjects.EscapeToken(cluster) + "." + subjects.EscapeToken(nspace) + ".*." + channelToken(ch)
}

// StreamSubjects are the subjects of cluster's stream.
func StreamSubjects(cluster string) []string {
	return []string{Prefix + "." + subjects.EscapeToken(cluster) + ".*.*.*"}
}

func channelToken(ch Channel) string {
	switch ch {
	case STDOUT:
		return tokenOut
	case STDERR:
		return tokenErr
	}
	return tokenDiag
}

// Message is r as the stream stores it: its subject names the process and
// channel, its headers the sequence, time, end and help, its body the
// bytes. id, when set, is the record's Nats-Msg-Id, so a publish retried
// after a lost acknowledgement is stored once.
func Message(r Record, id string) *nats.Msg {
	m := nats.NewMsg(Subject(r.Cluster, r.Nspace, r.Rank, r.Channel))
	m.Data = r.Data
	m.Header.Set(HeaderSeq, strconv.FormatUint(r.Seq, 10))
	m.Header.Set(HeaderTime, strconv.FormatInt(r.Time.UnixNano(), 10))
	if r.Complete {
		m.Header.Set(HeaderComplete, "true")
	}
	if r.Help != nil {
		m.Header.Set(HeaderHelpFile, r.Help.File)
		m.Header.Set(HeaderHelpTopic, r.Help.Topic)
	}
	if id != "" {
		m.Header.Set(nats.MsgIdHdr, id)
	}
	return m
}

// Parsed is one message of the stream: a process's record, or, when Job
// is set, a job's own record of that kind (Record then has no rank or
// channel, and for JobDiag its Data is the text). Live marks a record
// over its job's limit, which only a subscription sees: the stream did
// not keep it, so a gap before it cannot be filled.
type Parsed struct {
	Record
	Job  string
	Live bool
}

// ParseMessage reads a message of the stream. The message came from NATS
// and is checked: a subject outside the layout, a rank or header that does
// not parse gives pmix.ErrBadParam naming what was wrong.
func ParseMessage(subject string, h nats.Header, data []byte) (Parsed, error) {
	var p Parsed
	tok := strings.Split(subject, ".")
	if len(tok) == 7 && tok[6] == tokenLive && tok[4] != tokenJob {
		p.Live, tok = true, tok[:6]
	}
	if len(tok) != 6 || tok[0]+"."+tok[1] != Prefix {
		return p, pmix.Errorf(pmix.ErrBadParam, "iof: %s is not an output subject (%s.<cluster>.<nspace>.<rank>.<channel>)", pmix.Quote(subject), Prefix)
	}
	var err error
	if p.Cluster, err = subjects.UnescapeToken(tok[2]); err != nil {
		return p, pmix.Errorf(pmix.ErrBadParam, "iof: the cluster of %s: %v", pmix.Quote(subject), err)
	}
	if p.Nspace, err = subjects.UnescapeToken(tok[3]); err != nil {
		return p, pmix.Errorf(pmix.ErrBadParam, "iof: the nspace of %s: %v", pmix.Quote(subject), err)
	}
	p.Data = data
	if t := h.Get(HeaderTime); t != "" {
		ns, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return p, pmix.Errorf(pmix.ErrBadParam, "iof: %s header %s is not nanoseconds", HeaderTime, pmix.Quote(t))
		}
		p.Time = time.Unix(0, ns)
	}
	if tok[4] == tokenJob {
		switch tok[5] {
		case JobMeta, JobDiag, JobEnd:
			p.Job = tok[5]
			return p, nil
		}
		return p, pmix.Errorf(pmix.ErrBadParam, "iof: unknown job record %s", pmix.Quote(tok[5]))
	}
	if p.Rank, err = pmix.ParseRank(tok[4]); err != nil || !p.Rank.Valid() {
		return p, pmix.Errorf(pmix.ErrBadParam, "iof: the rank of %s is not a process's", pmix.Quote(subject))
	}
	switch tok[5] {
	case tokenOut:
		p.Channel = STDOUT
	case tokenErr:
		p.Channel = STDERR
	case tokenDiag:
		p.Channel = STDDIAG
	default:
		return p, pmix.Errorf(pmix.ErrBadParam, "iof: unknown channel %s", pmix.Quote(tok[5]))
	}
	if p.Seq, err = strconv.ParseUint(h.Get(HeaderSeq), 10, 64); err != nil {
		return p, pmix.Errorf(pmix.ErrBadParam, "iof: %s header %s is not a sequence", HeaderSeq, pmix.Quote(h.Get(HeaderSeq)))
	}
	p.Complete = h.Get(HeaderComplete) == "true"
	if f := h.Get(HeaderHelpFile); f != "" {
		p.Help = &Help{File: f, Topic: h.Get(HeaderHelpTopic)}
	}
	return p, nil
}
