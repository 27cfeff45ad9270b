package iof

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
)

var when = time.Date(2026, time.November, 23, 11, 26, 25, 0, time.UTC)

const prteNspace = "prterun-host-1234@1"

func rec(ch Channel, data string) Record {
	return Record{Cluster: "A", Nspace: prteNspace, Rank: 3, Channel: ch, Seq: 1, Time: when, Data: []byte(data)}
}

func newTestDisplay(t *testing.T, spec string, cfg Config) (d *Display, stdout, stderr *bytes.Buffer) {
	t.Helper()
	opts, err := ParseOutput(spec)
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cfg.Options, cfg.Stdout, cfg.Stderr, cfg.Location = opts, stdout, stderr, time.UTC
	d, err = NewDisplay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, stdout, stderr
}

// The expected bytes are OpenPMIx's (pmix_iof.c, research §2.3).
func TestDisplayFormats(t *testing.T) {
	source := func(string, pmix.Rank) (string, int, bool) { return "node7", 4242, true }
	tests := []struct {
		name, spec     string
		source         bool
		in             Record
		stdout, stderr string
	}{
		{"plain", "", false, rec(STDOUT, "hello\n"), "hello\n", ""},
		{"plain stderr", "", false, rec(STDERR, "oops\n"), "", "oops\n"},
		{"tag", "tag", false, rec(STDOUT, "hello\n"), "[1,3]<stdout>: hello\n", ""},
		{"tag stderr", "tag", false, rec(STDERR, "oops\n"), "", "[1,3]<stderr>: oops\n"},
		{"tag stddiag", "tag", false, rec(STDDIAG, "diag\n"), "", "[1,3]<stddiag>: diag\n"},
		{"tag merged", "tag,merge", false, rec(STDERR, "oops\n"), "[1,3]<stderr>: oops\n", ""},
		{"tag nspace without @", "tag", false, Record{Nspace: "job7", Rank: 0, Channel: STDOUT, Data: []byte("x\n")}, "[job7,0]<stdout>: x\n", ""},
		{"tag-fullname", "tag-fullname", false, rec(STDOUT, "hello\n"), "[prterun-host-1234@1,3]<stdout>: hello\n", ""},
		{"rank", "rank", false, rec(STDOUT, "hello\n"), "[3]<stdout>: hello\n", ""},
		{"tag-detailed unknown", "tag-detailed", false, rec(STDOUT, "hello\n"), "[1,3][unknown:unknown]<stdout>: hello\n", ""},
		{"tag-detailed", "tag-detailed", true, rec(STDOUT, "hello\n"), "[1,3][node7:4242]<stdout>: hello\n", ""},
		{"tag-detailed fullname", "tag-detailed,tag-fullname", true, rec(STDOUT, "hello\n"), "[prterun-host-1234@1,3][node7:4242]<stdout>: hello\n", ""},
		{"timestamp", "timestamp", false, rec(STDOUT, "hello\n"), "[Mon Nov 23 11:26:25 2026]<stdout>: hello\n", ""},
		{"timestamp tag", "timestamp,tag", false, rec(STDOUT, "hello\n"), "[Mon Nov 23 11:26:25 2026][1,3]<stdout>: hello\n", ""},
		{"timestamp rank", "timestamp,rank", false, rec(STDOUT, "hello\n"), "[Mon Nov 23 11:26:25 2026][3]<stdout>: hello\n", ""},
		{"ctime pads the day", "timestamp", false, Record{Nspace: "j", Channel: STDOUT, Time: time.Date(2026, 11, 5, 9, 3, 4, 0, time.UTC), Data: []byte("x\n")}, "[Thu Nov  5 09:03:04 2026]<stdout>: x\n", ""},
		{"xml", "xml", false, rec(STDOUT, "hello\n"), `<stdout rank="3">hello&#010;</stdout>` + "\n", ""},
		{"xml stderr", "xml", false, rec(STDERR, "oops\n"), `<stderr rank="3">oops&#010;</stderr>` + "\n", ""},
		{"xml escapes", "xml", false, rec(STDOUT, "a<b>&c\td \"q\"\n"), `<stdout rank="3">a&lt;b&gt;&amp;c&#009;d "q"&#010;</stdout>` + "\n", ""},
		{"xml utf-8", "xml", false, rec(STDOUT, "café €\n"), `<stdout rank="3">café €&#010;</stdout>` + "\n", ""},
		{"xml control and bad bytes", "xml", false, rec(STDOUT, "a\x01b\xffc\uffff\n"), `<stdout rank="3">a<byte hex="01"/>b<byte hex="ff"/>c<byte hex="ef"/><byte hex="bf"/><byte hex="bf"/>&#010;</stdout>` + "\n", ""},
		{"xml tag", "xml,tag", false, rec(STDOUT, "hello\n"), `<stdout jobid="1" rank="3">hello&#010;</stdout>` + "\n", ""},
		{"xml tag-fullname", "xml,tag-fullname", false, rec(STDOUT, "hello\n"), `<stdout nspace="prterun-host-1234@1" rank="3">hello&#010;</stdout>` + "\n", ""},
		{"xml timestamp", "xml,timestamp", false, rec(STDOUT, "hello\n"), `<stdout rank="3" timestamp="Mon Nov 23 11:26:25 2026">hello&#010;</stdout>` + "\n", ""},
		{"xml tag-detailed", "xml,tag-detailed", true, rec(STDOUT, "hello\n"), `<stdout nspace="prterun-host-1234@1" rank="3" host="node7" pid="4242">hello&#010;</stdout>` + "\n", ""},
		{"xml no newline", "xml", false, rec(STDOUT, "prompt> "), `<stdout rank="3">prompt&gt; </stdout>` + "\n", ""},
		{"xml two lines", "xml", false, rec(STDOUT, "a\nb\n"), `<stdout rank="3">a&#010;</stdout>` + "\n" + `<stdout rank="3">b&#010;</stdout>` + "\n", ""},
		{"every line tagged", "tag", false, rec(STDOUT, "a\nb\n"), "[1,3]<stdout>: a\n[1,3]<stdout>: b\n", ""},
		{"partial line tagged gets a newline", "tag", false, rec(STDOUT, "a\nprompt> "), "[1,3]<stdout>: a\n[1,3]<stdout>: prompt> \n", ""},
		{"partial line plain stays exact", "", false, rec(STDOUT, "prompt> "), "prompt> ", ""},
		{"raw keeps partial line", "raw,tag", false, rec(STDOUT, "prompt> "), "[1,3]<stdout>: prompt> ", ""},
		{"binary plain is byte-exact", "", false, rec(STDOUT, "\x00\xff\xfe\n"), "\x00\xff\xfe\n", ""},
		{"cluster tag", "cluster,tag", false, rec(STDOUT, "hello\n"), "[A:1,3]<stdout>: hello\n", ""},
		{"cluster rank", "cluster,rank", false, rec(STDOUT, "hello\n"), "[A:3]<stdout>: hello\n", ""},
		{"cluster xml", "cluster,xml", false, rec(STDOUT, "hello\n"), `<stdout cluster="A" rank="3">hello&#010;</stdout>` + "\n", ""},
		{"empty record", "tag", false, rec(STDOUT, ""), "", ""},
		{"complete without data", "tag", false, Record{Nspace: "j", Channel: STDOUT, Complete: true}, "", ""},
		{"stdin ignored", "tag", false, rec(STDIN, "input\n"), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			if tt.source {
				cfg.Source = source
			}
			d, stdout, stderr := newTestDisplay(t, tt.spec, cfg)
			if err := d.Write(tt.in); err != nil {
				t.Fatal(err)
			}
			if d.xmlDocument() && tt.stdout != "" {
				tt.stdout = "<mpirun>\n" + tt.stdout // the document's root, opened by the first record
			}
			if stdout.String() != tt.stdout || stderr.String() != tt.stderr {
				t.Fatalf("stdout %q stderr %q; want %q and %q", stdout, stderr, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestDisplayXMLIsWellFormed: XML output is one XML 1.0 document with one
// root, which a strict parser reads back to the bytes written, whatever
// they are: UTF-8 as it is, control and invalid bytes as <byte hex=""/>.
func TestDisplayXMLIsWellFormed(t *testing.T) {
	for _, spec := range []string{"xml", "xml,tag", "xml,tag-fullname,timestamp", "xml,tag-detailed,cluster"} {
		t.Run(spec, func(t *testing.T) {
			d, stdout, stderr := newTestDisplay(t, spec, Config{})
			lines := []string{"plain\n", "a<b>&c \"q\" 'r'\n", "tab\there\n", "cr\r\n", "café €\n", "bell\x07 nul\x00 esc\x1b\n",
				"bad \xff\xfe utf-8 \xc3\n", "nonchar \uffff \ufffe\n", "no newline"}
			for i, l := range lines {
				r := rec(Channel(STDOUT<<(i%2)), l)
				r.Nspace = "odd&\"ns\"<1>\x01@7"
				if err := d.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if stderr.Len() != 0 {
				t.Fatalf("XML on stderr: %q", stderr)
			}
			root, got, err := ReadXML(bytes.NewReader(stdout.Bytes()))
			if err != nil || root != "mpirun" {
				t.Fatalf("root %q, %v\n%s", root, err, stdout)
			}
			if string(got) != strings.Join(lines, "") {
				t.Fatalf("decoded %q; want %q", got, strings.Join(lines, ""))
			}
		})
	}
	d, stdout, _ := newTestDisplay(t, "xml", Config{})
	if err := d.Close(); err != nil || stdout.String() != "<mpirun>\n</mpirun>\n" {
		t.Fatalf("nothing shown: %q, %v", stdout, err)
	}
}

func TestDisplayJSONRoundTrip(t *testing.T) {
	in := []Record{
		rec(STDOUT, "hello <world> & \"all\"\n"),
		rec(STDERR, "\x00\xff\xfebinary\n"),
		{Cluster: "B", Nspace: "j", Rank: 15, Channel: STDDIAG, Seq: 9, Time: when.Add(time.Nanosecond), Data: []byte("é ünïcode\n")},
		{Cluster: "B", Nspace: "j", Rank: 15, Channel: STDOUT, Seq: 10, Time: when, Complete: true},
	}
	d, stdout, _ := newTestDisplay(t, "json,merge", Config{})
	for _, r := range in {
		if err := d.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.SplitAfter(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != len(in) {
		t.Fatalf("%d lines; want %d:\n%s", len(lines), len(in), stdout)
	}
	if !strings.Contains(lines[1], `"data_b64":"AP/+YmluYXJ5Cg=="`) || strings.Contains(lines[1], `"data":`) {
		t.Errorf("binary record not base64: %s", lines[1])
	}
	if want := `{"cluster":"A","nspace":"prterun-host-1234@1","rank":3,"channel":"stdout","seq":1,"ts":"2026-11-23T11:26:25Z","data":"hello <world> & \"all\"\n"}` + "\n"; lines[0] != want {
		t.Errorf("line 0 = %s; want %s", lines[0], want)
	}
	for i, line := range lines {
		got, err := ParseJSON([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		want := in[i]
		if got.Cluster != want.Cluster || got.Nspace != want.Nspace || got.Rank != want.Rank || got.Channel != want.Channel ||
			got.Seq != want.Seq || !got.Time.Equal(want.Time) || !bytes.Equal(got.Data, want.Data) || got.Complete != want.Complete {
			t.Errorf("line %d round-tripped to %+v; want %+v", i, got, want)
		}
	}
	for _, bad := range []string{"", "{", `{"channel":"stdweird"}`} {
		if _, err := ParseJSON([]byte(bad)); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("ParseJSON(%q) = %v; want ErrBadParam", bad, err)
		}
	}
}

func TestDisplayFiles(t *testing.T) {
	dir := t.TempDir()
	size := func(string) int { return 16 }
	tests := []struct {
		spec  string
		files map[string]string
	}{
		{"file=" + filepath.Join(dir, "f", "out"), map[string]string{
			"f/out.prterun-host-1234@1.03.out": "a\nc\n",
			"f/out.prterun-host-1234@1.03.err": "b\n",
			"f/out.prterun-host-1234@1.12.out": "d\n",
		}},
		{"file=" + filepath.Join(dir, "m", "out") + ",merge,tag", map[string]string{
			"m/out.prterun-host-1234@1.03.out": "[1,3]<stdout>: a\n[1,3]<stderr>: b\n[1,3]<stdout>: c\n",
			"m/out.prterun-host-1234@1.12.out": "[1,12]<stdout>: d\n",
		}},
		{"dir=" + filepath.Join(dir, "d"), map[string]string{
			"d/prterun-host-1234@1/rank.03/stdout": "a\nc\n",
			"d/prterun-host-1234@1/rank.03/stderr": "b\n",
			"d/prterun-host-1234@1/rank.12/stdout": "d\n",
		}},
		{"dir=" + filepath.Join(dir, "c") + ",cluster", map[string]string{
			"c/A:prterun-host-1234@1/rank.03/stdout": "a\nc\n",
			"c/A:prterun-host-1234@1/rank.03/stderr": "b\n",
			"c/A:prterun-host-1234@1/rank.12/stdout": "d\n",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			d, stdout, stderr := newTestDisplay(t, tt.spec, Config{JobSize: size})
			last := rec(STDOUT, "d\n")
			last.Rank = 12
			for _, r := range []Record{rec(STDOUT, "a\n"), rec(STDERR, "b\n"), rec(STDOUT, "c\n"), last} {
				if err := d.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if n := len(d.files); n != len(tt.files) {
				t.Errorf("%d files open; want %d", n, len(tt.files))
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if err := d.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			for name, want := range tt.files {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || string(got) != want {
					t.Errorf("%s = %q, %v; want %q", name, got, err, want)
				}
			}
			if stdout.Len()+stderr.Len() != 0 {
				t.Errorf("terminal got %q %q; want nothing", stdout, stderr)
			}
		})
	}
}

func TestDisplayFileNoPadding(t *testing.T) {
	dir := t.TempDir()
	d, _, _ := newTestDisplay(t, "file="+filepath.Join(dir, "o"), Config{})
	if err := d.Write(rec(STDOUT, "x\n")); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := os.Stat(filepath.Join(dir, "o.prterun-host-1234@1.3.out")); err != nil {
		t.Fatal(err)
	}
	bad := rec(STDOUT, "x\n")
	bad.Nspace = "../escape"
	if err := d.Write(bad); !errors.Is(err, pmix.ErrBadParam) {
		t.Fatalf("nspace with a slash: %v; want ErrBadParam", err)
	}
}

func TestNewDisplayErrors(t *testing.T) {
	if _, err := NewDisplay(Config{}); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("no writers: %v", err)
	}
	if _, err := NewDisplay(Config{Options: Options{JSON: true, XML: true}, Stdout: io.Discard, Stderr: io.Discard}); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("json+xml: %v", err)
	}
	if _, err := NewDisplay(Config{Options: Options{Dir: "x"}}); err != nil {
		t.Errorf("dir without writers: %v", err)
	}
}

// Many ranks writing at once: every line of the output starts with a tag.
func TestDisplayConcurrentNeverTagsMidLine(t *testing.T) {
	d, stdout, _ := newTestDisplay(t, "tag", Config{})
	var wg sync.WaitGroup
	for rank := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r := rec(STDOUT, fmt.Sprintf("line %d of rank %d\nsecond line\n", i, rank))
				r.Rank = pmix.Rank(rank)
				if err := d.Write(r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	tagged := regexp.MustCompile(`^\[1,\d+\]<stdout>: (line \d+ of rank \d+|second line)$`)
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 16*200*2 {
		t.Fatalf("%d lines; want %d", len(lines), 16*200*2)
	}
	for _, l := range lines {
		if !tagged.MatchString(l) {
			t.Fatalf("bad line %q", l)
		}
	}
}

func FuzzDisplayTagsEveryLine(f *testing.F) {
	f.Add([]byte("a\nb"))
	f.Add([]byte("\n\n\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		d, err := NewDisplay(Config{Options: Options{Rank: true}, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Write(Record{Channel: STDOUT, Data: data}); err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			return
		}
		if !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			t.Fatalf("output %q does not end a line", out.Bytes())
		}
		for _, l := range bytes.SplitAfter(out.Bytes()[:out.Len()-1], []byte("\n")) {
			if !bytes.HasPrefix(l, []byte("[0]<stdout>: ")) {
				t.Fatalf("untagged line %q in %q", l, out.Bytes())
			}
		}
	})
}

func TestDisplayCompleteClosesFile(t *testing.T) {
	dir := t.TempDir()
	d, _, _ := newTestDisplay(t, "dir="+dir+",merge", Config{})
	end := rec(STDOUT, "")
	end.Complete = true
	for _, r := range []Record{rec(STDOUT, "a\n"), end, rec(STDERR, "b\n")} {
		if err := d.Write(r); err != nil {
			t.Fatal(err)
		}
		if r.Complete && len(d.files) != 0 {
			t.Fatalf("%d files open after the channel completed", len(d.files))
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, prteNspace, "rank.3", "stdout"))
	if err != nil || string(got) != "a\nb\n" {
		t.Fatalf("merged file = %q, %v; want %q", got, err, "a\nb\n")
	}
}
