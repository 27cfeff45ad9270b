package iof

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
)

const waitTime = 10 * time.Second

func openService(t *testing.T, cfg ServiceConfig) (*Service, *nats.Conn) {
	t.Helper()
	s := clustertest.StartServer(t, "A")
	nc := clustertest.Connect(t, s.ClientURL())
	cfg.Conn, cfg.Cluster = nc, "A"
	svc, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc, nc
}

// collector gathers what a Follower delivers.
type collector struct {
	mu   sync.Mutex
	recs []Parsed
}

func (c *collector) add(d Delivered) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, d.Parsed)
}

func (c *collector) snapshot() []Parsed {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Parsed(nil), c.recs...)
}

// completes waits until n channels have ended and returns everything.
func (c *collector) completes(t *testing.T, n int) []Parsed {
	t.Helper()
	var recs []Parsed
	clustertest.WaitFor(t, waitTime, func() error {
		recs = c.snapshot()
		got := 0
		for _, r := range recs {
			if r.Complete {
				got++
			}
		}
		if got < n {
			return fmt.Errorf("%d of %d channels complete", got, n)
		}
		return nil
	})
	return recs
}

func follow(t *testing.T, nc *nats.Conn, nspace string) *collector {
	t.Helper()
	c := &collector{}
	f, err := Follow(t.Context(), nc, "A", nspace, FollowOptions{Bad: func(err error) { t.Error(err) }}, c.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return c
}

// Lines stay whole, a partial last line is flushed at Close, every
// channel ends with one Complete record, and sequences count from 1.
func TestCaptureWholeLines(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true, Idle: time.Hour})
	src, err := svc.Source(pmix.Proc{Nspace: "job", Rank: 3}, SourceOptions{Incarnation: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	c := follow(t, nc, "job")
	for _, w := range []string{"he", "llo\nwor", "ld\n", "", "no newline"} {
		_, _ = src.Stdout().Write([]byte(w))
	}
	_, _ = src.Stderr().Write([]byte("oops\n"))
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	recs := c.completes(t, 2)
	var out bytes.Buffer
	seq := map[Channel]uint64{}
	for _, r := range recs {
		if r.Rank != 3 || r.Nspace != "job" || r.Cluster != "A" {
			t.Errorf("record of %s:%s.%d", r.Cluster, r.Nspace, r.Rank)
		}
		seq[r.Channel]++
		if r.Seq != seq[r.Channel] {
			t.Errorf("%v record %d has seq %d", r.Channel, seq[r.Channel], r.Seq)
		}
		if r.Channel == STDOUT {
			if len(r.Data) > 0 && !r.Complete && r.Data[len(r.Data)-1] != '\n' && string(r.Data) != "no newline" {
				t.Errorf("a record ends mid-line: %q", r.Data)
			}
			out.Write(r.Data)
		}
		if r.Time.IsZero() {
			t.Error("a record without its source time")
		}
	}
	if out.String() != "hello\nworld\nno newline" {
		t.Errorf("stdout %q", out.String())
	}
}

// A partial line is sent after the idle time without waiting for Close.
func TestCaptureIdleFlush(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true, Idle: 20 * time.Millisecond})
	src, err := svc.Source(pmix.Proc{Nspace: "job", Rank: 0}, SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c := follow(t, nc, "job")
	_, _ = src.Stdout().Write([]byte("password: "))
	clustertest.WaitFor(t, waitTime, func() error {
		if recs := c.snapshot(); len(recs) == 0 || string(recs[0].Data) != "password: " {
			return errors.New("the prompt is not out yet")
		}
		return nil
	})
}

// Binary bytes and a 16 MiB line arrive byte-exact, cut into records of
// at most MaxRecord.
func TestCaptureBinaryAndLongLine(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true, Idle: time.Hour})
	src, err := svc.Source(pmix.Proc{Nspace: "bin", Rank: 0}, SourceOptions{Limit: Limit{Bytes: 64 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	c := follow(t, nc, "bin")
	var want bytes.Buffer
	for i := range 256 {
		want.WriteByte(byte(i))
	}
	want.Write(bytes.Repeat([]byte{0xff, 'x'}, 8<<20))
	want.WriteByte('\n')
	for b := want.Bytes(); len(b) > 0; {
		n := min(len(b), 65536)
		_, _ = src.Stdout().Write(b[:n])
		b = b[n:]
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, r := range c.completes(t, 2) {
		if len(r.Data) > MaxRecord {
			t.Fatalf("a record of %d bytes", len(r.Data))
		}
		if r.Channel == STDOUT {
			got.Write(r.Data)
		}
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("%d bytes arrived, want %d, equal prefix %d", got.Len(), want.Len(), commonPrefix(got.Bytes(), want.Bytes()))
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// RAW output is not held back for a newline.
func TestCaptureRaw(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true, Idle: time.Hour})
	src, err := svc.Source(pmix.Proc{Nspace: "raw", Rank: 1}, SourceOptions{Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c := follow(t, nc, "raw")
	_, _ = src.Stdout().Write([]byte("abc"))
	clustertest.WaitFor(t, waitTime, func() error {
		if recs := c.snapshot(); len(recs) == 0 || string(recs[0].Data) != "abc" {
			return errors.New("raw bytes not out yet")
		}
		return nil
	})
}

// A job's channel over its limit is truncated with one warning, however
// many processes write.
func TestLimitDropNewest(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true, Idle: time.Hour})
	c := follow(t, nc, "big")
	const procs, lines = 4, 200
	line := strings.Repeat("x", 99) + "\n" // 100 bytes
	limit := Limit{Bytes: 16 << 10}
	var wg sync.WaitGroup
	for r := range procs {
		src, err := svc.Source(pmix.Proc{Nspace: "big", Rank: pmix.Rank(r)}, SourceOptions{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range lines {
				_, _ = src.Stdout().Write([]byte(line))
			}
			if err := src.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	recs := c.completes(t, 2*procs)
	var stored int64
	warnings := 0
	for _, r := range recs {
		if r.Job == JobDiag {
			warnings++
			if !strings.Contains(string(r.Data), "stdout of job big reached its limit of 16 KiB") {
				t.Errorf("warning %q", r.Data)
			}
		}
		if r.Job == "" && r.Channel == STDOUT {
			stored += int64(len(r.Data))
		}
	}
	if warnings != 1 {
		t.Errorf("%d truncation warnings, want 1", warnings)
	}
	if stored > limit.Bytes || stored < limit.Bytes/2 {
		t.Errorf("%d bytes of stdout stored, limit %d", stored, limit.Bytes)
	}
}

// DROP_OLDEST keeps the newest output of the job, about the limit.
func TestLimitDropOldest(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true, Idle: time.Hour})
	limit := Limit{Bytes: 16 << 10, DropOldest: true}
	src, err := svc.Source(pmix.Proc{Nspace: "old", Rank: 0}, SourceOptions{Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		_, _ = fmt.Fprintf(src.Stdout(), "%099d\n", i)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	c := follow(t, nc, "old")
	recs := c.completes(t, 2)
	var out bytes.Buffer
	warnings := 0
	for _, r := range recs {
		if r.Job == JobDiag {
			warnings++
		} else if r.Channel == STDOUT {
			out.Write(r.Data)
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings", warnings)
	}
	if n := int64(out.Len()); n > limit.Bytes+MaxRecord+limit.block() || n < limit.Bytes-MaxRecord {
		t.Errorf("%d bytes kept, limit %d", n, limit.Bytes)
	}
	if !strings.HasSuffix(out.String(), fmt.Sprintf("%099d\n", 999)) {
		t.Error("the newest line was dropped")
	}
}

// A message that does not follow the layout is reported, not delivered.
func TestParseMessageRejects(t *testing.T) {
	for _, subj := range []string{"pmix.iof.A.job", "pmix.iof.A.job.x.out", "pmix.iof.A.job.4294967295.out", "pmix.iof.A.job.1.in", "pmix.iof.A.job.job.what", "pmix.evt.A.job.1.out"} {
		if _, err := ParseMessage(subj, nats.Header{HeaderSeq: []string{"1"}}, nil); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("%s: %v", subj, err)
		}
	}
	if _, err := ParseMessage("pmix.iof.A.job.1.out", nats.Header{HeaderSeq: []string{"-1"}}, nil); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("bad seq: %v", err)
	}
	r := Record{Cluster: "c.x", Nspace: "n s", Rank: 7, Channel: STDERR, Seq: 9, Time: time.Unix(5, 6), Data: []byte{0, 1}, Complete: true, Help: &Help{File: "f", Topic: "t"}}
	m := Message(r, "id")
	p, err := ParseMessage(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if p.Cluster != r.Cluster || p.Nspace != r.Nspace || p.Rank != 7 || p.Channel != STDERR || p.Seq != 9 || !p.Time.Equal(r.Time) || !p.Complete || *p.Help != *r.Help || !bytes.Equal(p.Data, r.Data) {
		t.Errorf("round trip: %+v", p)
	}
}

// TestShortMaxAge: output kept less than the stream's usual duplicate
// window (a minute) opens: the window shrinks to the age (JetStream
// refuses a longer one; the agent failed to start with OutputMaxAge 10s).
func TestShortMaxAge(t *testing.T) {
	svc, _ := openService(t, ServiceConfig{MaxAge: 10 * time.Second})
	if svc == nil {
		t.Fatal("no service")
	}
}
