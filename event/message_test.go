package event

import (
	"reflect"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

func sampleMessage() *Message {
	return &Message{
		ID: "x.1", Code: pmix.EventNodeDown, Range: pmix.RangeCustom, Environment: true,
		Source:  bus.Origin{Cluster: "A", Node: "n1", Session: "s", Proc: pmix.Proc{Nspace: "j", Rank: 2}},
		Targets: []pmix.Proc{{Nspace: "j", Rank: 1}},
		Info:    []pmix.Info{pmix.NewInfo("k", pmix.String("v"))},
		Time:    time.Unix(0, 12345),
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []*Message{sampleMessage(), {ID: "rm", Code: 1, Range: pmix.RangeRM, Time: time.Unix(0, 0)}} {
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := UnmarshalMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Source, m.Source) || got.ID != m.ID || got.Code != m.Code || got.Range != m.Range ||
			got.Environment != m.Environment || !got.Time.Equal(m.Time) || len(got.Targets) != len(m.Targets) || len(got.Info) != len(m.Info) {
			t.Fatalf("got %+v, want %+v", got, m)
		}
	}
}
