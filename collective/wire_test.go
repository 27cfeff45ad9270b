package collective

import (
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

func TestWireRoundTrip(t *testing.T) {
	c := &contribution{
		op:  op{kind: KindFence, id: "x", procs: []pmix.Proc{{Nspace: "A:job", Rank: pmix.RankWildcard}}},
		gen: 3, cluster: "A", node: "n1", covers: []pmix.Proc{{Nspace: "A:job", Rank: 0}},
		sizes: []nsSize{{nspace: "A:job", size: 2}}, timeout: 1500 * time.Millisecond, collect: true,
		data:   []procData{{proc: pmix.Proc{Nspace: "A:job", Rank: 0}, cluster: "A", node: "n1", puts: []proto.Put{{Scope: pmix.ScopeGlobal, Key: "k", Value: pmix.String("v")}}}},
		status: pmix.ErrTimeout, message: "m",
		jobs: []jobInfo{{nspace: "A:job", info: []pmix.Info{pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(2))}}},
	}
	b, err := c.marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := unmarshalContribution(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.signature() != c.signature() || got.gen != 3 || got.timeout != c.timeout || len(got.data) != 1 || got.data[0].puts[0].Key != "k" || got.message != "m" || len(got.jobs) != 1 || len(got.jobs[0].info) != 1 {
		t.Fatalf("round trip: %+v", got)
	}
	r := &release{gen: 2, outcome: outcomeOf(ErrTimeout), data: c.data}
	if b, err = r.marshal(); err != nil {
		t.Fatal(err)
	}
	gr, err := unmarshalRelease(b)
	if err != nil {
		t.Fatal(err)
	}
	if gr.gen != 2 || gr.code != ErrTimeout.Code || len(gr.data) != 1 {
		t.Fatalf("release round trip: %+v", gr)
	}
	for _, bad := range [][]byte{nil, {0x91, 0x01}, append(b, 0)} {
		if _, err := unmarshalRelease(bad); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
			t.Errorf("%x: %v", bad, err)
		}
	}
	g := goneNotice{proc: pmix.Proc{Nspace: "B:job", Rank: 4}, abnormal: true, cause: "B/n2/9"}
	if b, err = g.marshal(); err != nil {
		t.Fatal(err)
	}
	if got, err := unmarshalGoneNotice(b); err != nil || got != g {
		t.Fatalf("gone notice round trip: %+v, %v", got, err)
	}
	if b, err = (goneAsk{nspace: "B:job"}).marshal(); err != nil {
		t.Fatal(err)
	}
	if got, err := unmarshalGoneAsk(b); err != nil || got.nspace != "B:job" {
		t.Fatalf("gone ask round trip: %+v, %v", got, err)
	}
	k := opKey{sig: c.signature(), gen: 7}
	if b, err = (check{key: k}).marshal(); err != nil {
		t.Fatal(err)
	}
	if got, err := unmarshalCheck(b); err != nil || got.key != k {
		t.Fatalf("check round trip: %+v, %v", got, err)
	}
	short, _ := (check{key: opKey{sig: "abc", gen: 1}}).marshal()
	for _, bad := range [][]byte{nil, short, append(b, 0)} {
		if _, err := unmarshalCheck(bad); pmix.StatusOf(err) != pmix.ErrUnpackFailure {
			t.Errorf("check %x: %v", bad, err)
		}
	}
}

// TestSubjects checks the examples of docs/subjects.md.
func TestSubjects(t *testing.T) {
	if got := LeadSubject("A", "job.1"); got != "pmix.coll.lead.A.job=2E1" {
		t.Errorf("LeadSubject: %s", got)
	}
	if got := CheckSubject("B", "n.2"); got != "pmix.coll.check.B.n=2E2" {
		t.Errorf("CheckSubject: %s", got)
	}
	o := op{kind: KindFence, procs: []pmix.Proc{{Nspace: "A:job", Rank: pmix.RankWildcard}}}
	if got := ReleaseSubject(o.signature()); len(got) != len("pmix.coll.")+32+len(".rel") {
		t.Errorf("ReleaseSubject: %s", got)
	}
	procs, err := canonical("A", []pmix.Proc{{Nspace: "B:viz", Rank: 1}, {Nspace: "job", Rank: 3}, {Nspace: "A:job", Rank: pmix.RankWildcard}, {Nspace: "B:viz", Rank: 0}})
	if err != nil {
		t.Fatal(err)
	}
	want := []pmix.Proc{{Nspace: "A:job", Rank: pmix.RankWildcard}, {Nspace: "B:viz", Rank: 0}, {Nspace: "B:viz", Rank: 1}}
	if len(procs) != len(want) {
		t.Fatalf("canonical: %v", procs)
	}
	for i := range want {
		if procs[i] != want[i] {
			t.Fatalf("canonical: %v, want %v", procs, want)
		}
	}
}

// FuzzUnmarshal: no message from the network makes a decoder panic or
// allocate beyond its input, and what decodes encodes again.
func FuzzUnmarshal(f *testing.F) {
	c := &contribution{op: op{kind: KindConnect, id: "i", procs: []pmix.Proc{{Nspace: "A:j", Rank: 1}}}, covers: []pmix.Proc{{Nspace: "A:j", Rank: 1}},
		sizes: []nsSize{{nspace: "A:j", size: 1}}, data: []procData{{proc: pmix.Proc{Nspace: "A:j", Rank: 1}, puts: []proto.Put{{Scope: 3, Key: "k", Value: pmix.Int8(1)}}}}}
	r := &release{gen: 1, outcome: outcomeOf(ErrFinished), nspace: "A:cnct.x.1", members: c.covers, data: c.data}
	for _, m := range []interface{ marshal() ([]byte, error) }{c, r, ack{}, directRequest{key: "k", wait: time.Second}, directAnswer{data: c.data},
		goneNotice{proc: pmix.Proc{Nspace: "A:j", Rank: 1}, cause: "A/n/1"}, goneAsk{nspace: "A:j"}, check{key: opKey{sig: "0123456789abcdef0123456789abcdef", gen: 2}},
		&release{gen: 1, members: c.covers, ctxid: 1 << 50, flags: FlagGroup}, goneNotice{proc: pmix.Proc{Nspace: "A:j", Rank: 1}, left: "g"}} {
		b, err := m.marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := unmarshalContribution(b); err == nil {
			if _, err := c.marshal(); err != nil {
				t.Fatalf("contribution decoded but does not encode: %v", err)
			}
		}
		if r, err := unmarshalRelease(b); err == nil {
			if _, err := r.marshal(); err != nil {
				t.Fatalf("release decoded but does not encode: %v", err)
			}
		}
		_, _ = unmarshalAck(b)
		_, _ = unmarshalDirectRequest(b)
		_, _ = unmarshalDirectAnswer(b)
		if g, err := unmarshalGoneNotice(b); err == nil {
			if _, err := g.marshal(); err != nil {
				t.Fatalf("gone notice decoded but does not encode: %v", err)
			}
		}
		_, _ = unmarshalGoneAsk(b)
		if c, err := unmarshalCheck(b); err == nil {
			if _, err := c.marshal(); err != nil {
				t.Fatalf("check decoded but does not encode: %v", err)
			}
		}
		if procs, flags, err := unmarshalInvitation(b); err == nil {
			if _, err := marshalInvitation(procs, flags); err != nil {
				t.Fatalf("invitation decoded but does not encode: %v", err)
			}
		}
	})
}

// TestGroupWire: a release with a context id, a notice of a member that
// left a group and an invitation come back as they were; a release
// without a context id keeps the ten elements agents before groups read.
func TestGroupWire(t *testing.T) {
	members := []pmix.Proc{{Nspace: "A:j", Rank: 0}, {Nspace: "B:k", Rank: 2}}
	for _, in := range []*release{{gen: 3, members: members, ctxid: 7 << 48, flags: FlagGroup | FlagAssignContextID}, {gen: 4, members: members}} {
		b, err := in.marshal()
		if err != nil {
			t.Fatal(err)
		}
		out, err := unmarshalRelease(b)
		if err != nil || out.ctxid != in.ctxid || out.flags != in.flags || len(out.members) != 2 {
			t.Errorf("release %+v: got %+v, %v", in, out, err)
		}
		if want := byte(0x9a); in.ctxid == 0 && b[0] != want {
			t.Errorf("release without a context id: array header %#x, want %#x (10 elements)", b[0], want)
		}
	}
	b, err := goneNotice{proc: members[1], left: "grp"}.marshal()
	if err != nil {
		t.Fatal(err)
	}
	if g, err := unmarshalGoneNotice(b); err != nil || g.left != "grp" || g.proc != members[1] {
		t.Errorf("left notice: %+v, %v", g, err)
	}
	b, err = marshalInvitation(members, FlagGroup|FlagOptional|FlagInvitation)
	if err != nil {
		t.Fatal(err)
	}
	if procs, flags, err := unmarshalInvitation(b); err != nil || len(procs) != 2 || flags != FlagGroup|FlagOptional|FlagInvitation {
		t.Errorf("invitation: %v, %v, %v", procs, flags, err)
	}
	if _, _, err := unmarshalInvitation([]byte{0x93, 0x01, 0x90, 0x00}); err == nil {
		t.Error("an invitation without members decoded")
	}
}

// TestSignatureCache: the cache gives what signature computes, for
// operations seen again and new ones.
func TestSignatureCache(t *testing.T) {
	var c sigCache
	ops := []op{
		{kind: KindFence, procs: []pmix.Proc{{Nspace: "A:job", Rank: pmix.RankWildcard}}},
		{kind: KindFence, id: "x", procs: []pmix.Proc{{Nspace: "A:job", Rank: pmix.RankWildcard}}},
		{kind: KindConnect, procs: []pmix.Proc{{Nspace: "A:job", Rank: 0}, {Nspace: "B:other", Rank: 3}}},
	}
	for range 2 {
		for _, o := range ops {
			if got, want := c.of(o), o.signature(); got != want {
				t.Fatalf("%v: cached %s, want %s", o, got, want)
			}
		}
	}
}
