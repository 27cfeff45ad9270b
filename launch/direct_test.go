package launch

import (
	"log/slog"
	"testing"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// directRun is a run of job "j", ranks 0 and 1 on node n1 of cluster A
// and rank 2 on n2, attached to n1.
func directRun() (*Run, *directPath) {
	j := &runJob{nspace: "j", cluster: "A"}
	r := &Run{log: slog.New(slog.DiscardHandler), nspace: "j", jobs: []*runJob{j},
		places: []Placement{{Rank: 0, Node: "n1", Cluster: "A"}, {Rank: 1, Node: "n1", Cluster: "A"}, {Rank: 2, Node: "n2", Cluster: "A"}}}
	return r, &directPath{j: j, node: "n1"}
}

// What an agent sends on a direct path is checked before it is shown: a
// record of another job, of a rank on another node, of a channel that
// is none, too long, or with fields of the wrong type is refused.
func TestDirectRecordChecks(t *testing.T) {
	r, p := directRun()
	ok := func() *proto.Frame {
		return &proto.Frame{Type: proto.TypeIOFData, Seq: 1, Source: pmix.Proc{Nspace: "j", Rank: 1}, Channels: uint16(iof.STDOUT), Payload: []byte("hi\n"),
			Info: []pmix.Info{pmix.NewInfo(pmix.KeyIOFComplete, pmix.Bool(true))}}
	}
	rec, err := r.directRecord(p, ok())
	if err != nil || rec.Rank != 1 || !rec.Complete || string(rec.Data) != "hi\n" || rec.Cluster != "A" {
		t.Fatalf("%+v, %v", rec, err)
	}
	for name, change := range map[string]func(f *proto.Frame){
		"another type":    func(f *proto.Frame) { f.Type = proto.TypeInvoke },
		"a pull's id":     func(f *proto.Frame) { f.ID = 3 },
		"another job":     func(f *proto.Frame) { f.Source.Nspace = "k" },
		"another node's":  func(f *proto.Frame) { f.Source.Rank = 2 },
		"no such rank":    func(f *proto.Frame) { f.Source.Rank = 7 },
		"stdin":           func(f *proto.Frame) { f.Channels = uint16(iof.STDIN) },
		"two channels":    func(f *proto.Frame) { f.Channels = uint16(iof.STDOUT | iof.STDERR) },
		"sequence 0":      func(f *proto.Frame) { f.Seq = 0 },
		"too long":        func(f *proto.Frame) { f.Payload = make([]byte, iof.MaxRecord+1) },
		"complete, typed": func(f *proto.Frame) { f.Info = []pmix.Info{pmix.NewInfo(pmix.KeyIOFComplete, pmix.String("yes"))} },
		"help on stdout": func(f *proto.Frame) {
			f.Info = []pmix.Info{pmix.NewInfo(pmix.KeyLogKey, pmix.String("f")), pmix.NewInfo(pmix.KeyLogVal, pmix.String("t"))}
		},
	} {
		f := ok()
		change(f)
		if _, err := r.directRecord(p, f); pmix.StatusOf(err) != pmix.ErrBadParam {
			t.Errorf("%s: %v, want PMIX_ERR_BAD_PARAM", name, err)
		}
	}
}

// FuzzDirectRecord: whatever bytes a direct path carries, decoding and
// checking them neither panics nor lets through a record of a rank the
// path's agent does not run.
func FuzzDirectRecord(f *testing.F) {
	for _, fr := range []*proto.Frame{
		{Type: proto.TypeIOFData, Seq: 1, Source: pmix.Proc{Nspace: "j", Rank: 0}, Channels: uint16(iof.STDDIAG), Payload: []byte("help\n"),
			Info: []pmix.Info{pmix.NewInfo(pmix.KeyLogKey, pmix.String("f")), pmix.NewInfo(pmix.KeyLogVal, pmix.String("t"))}},
		{Type: proto.TypeIOFData, Seq: 9, Source: pmix.Proc{Nspace: "j", Rank: 1}, Channels: uint16(iof.STDERR)},
	} {
		b, err := fr.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	r, p := directRun()
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := proto.Unmarshal(b)
		if err != nil {
			return
		}
		rec, err := r.directRecord(p, fr)
		if err != nil {
			return
		}
		if rec.Nspace != "j" || rec.Rank > 1 || rec.Seq == 0 || len(rec.Data) > iof.MaxRecord || (rec.Help != nil && rec.Channel != iof.STDDIAG) {
			t.Fatalf("let through %+v", rec)
		}
	})
}
