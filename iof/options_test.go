package iof

import (
	"errors"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestParseOutput(t *testing.T) {
	tests := []struct {
		spec string
		want Options
	}{
		{"", Options{}},
		{"tag", Options{Tag: true}},
		{"TAG", Options{Tag: true}},
		{"Tag-Det", Options{TagDetailed: true}},
		{"tag-f", Options{TagFullname: true}},
		{"tag-detailed,tag-fullname", Options{TagDetailed: true, TagFullname: true}},
		{"ran", Options{Rank: true}},
		{"raw", Options{Raw: true}},
		{"ti,x", Options{Timestamp: true, XML: true}},
		{"tag, timestamp", Options{Tag: true, Timestamp: true}},
		{"m", Options{Merge: true}},
		{"merge-stderr-to-stdout=yes", Options{Merge: true}},
		{"tag=0", Options{}},
		{"tag=ENABLE,tag=disable", Options{}},
		{"file=/tmp/out", Options{File: "/tmp/out"}},
		{"FILE=/tmp/A=b", Options{File: "/tmp/A=b"}},
		{"d=/tmp/o", Options{Dir: "/tmp/o"}},
		{"json,merge", Options{JSON: true, Merge: true}},
		{"raw,tag", Options{Raw: true, Tag: true}},
		{"c,rank", Options{Cluster: true, Rank: true}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got, err := ParseOutput(tt.spec)
			if err != nil || got != tt.want {
				t.Fatalf("ParseOutput(%q) = %+v, %v; want %+v", tt.spec, got, err, tt.want)
			}
		})
	}
}

func TestParseOutputErrors(t *testing.T) {
	tests := []struct {
		spec, want string
	}{
		{"bogus", `unknown directive "bogus"; valid: tag, tag-detailed, tag-fullname, rank, timestamp, xml, merge-stderr-to-stdout, file, dir, raw, json, cluster`},
		{"ra", `directive "ra" is ambiguous: rank, raw`},
		{"t", `directive "t" is ambiguous: tag, tag-detailed, tag-fullname, timestamp`},
		{"tag,", "empty directive"},
		{"tag=maybe", `tag="maybe": want 1/0`},
		{"file", "file needs a value"},
		{"dir=", "dir needs a value"},
		{"file=a,dir=b", "file and dir cannot be used together"},
		{"json,xml", "json and xml"},
		{"json,tag", "json and tag"},
		{"json,timestamp", "json and timestamp"},
		{"tag,rank", "tag and rank"},
		{"tag,tag-fullname", "tag and tag-fullname"},
		{"tag-detailed,rank", "tag-detailed and rank"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := ParseOutput(tt.spec)
			if !errors.Is(err, pmix.ErrBadParam) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseOutput(%q) error = %v; want ErrBadParam containing %q", tt.spec, err, tt.want)
			}
		})
	}
}

func FuzzParseOutput(f *testing.F) {
	for _, s := range []string{"tag", "t,x", "file=a", "json,merge", "tag-det,tag-f=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		o, err := ParseOutput(spec)
		if err == nil {
			if verr := o.validate(); verr != nil {
				t.Fatalf("ParseOutput(%q) accepted options that do not validate: %v", spec, verr)
			}
		} else if !errors.Is(err, pmix.ErrBadParam) {
			t.Fatalf("ParseOutput(%q) error %v is not ErrBadParam", spec, err)
		}
	})
}
