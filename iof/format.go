package iof

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pmixbus/pmixbus/pmix"
)

// ctimeLayout is ctime(3) without its newline: what OpenPMIx prints.
const ctimeLayout = "Mon Jan _2 15:04:05 2006"

// Config configures a Display.
type Config struct {
	Options Options
	// Stdout and Stderr receive terminal output; both are required unless
	// Options.File or Options.Dir sends everything to files.
	Stdout, Stderr io.Writer
	// Location renders timestamps; nil means time.Local (ctime does the same).
	Location *time.Location
	// Source returns the host and pid of a process for tag-detailed; nil,
	// or ok false, prints "unknown" for both as OpenPMIx does.
	Source func(nspace string, rank pmix.Rank) (host string, pid int, ok bool)
	// JobSize returns the number of processes of an nspace; it sets the
	// zero-padding of the rank in file and dir names (as many digits as the
	// size has). nil or 0 means no padding.
	JobSize func(nspace string) int
}

// Display renders Records as `pmixbus run --output` asks: terminal output in
// OpenPMIx's formats, JSON lines, or per-rank files. It is safe for
// concurrent use: each Write holds a lock while it writes, so the lines of
// two records never interleave.
//
// The Display assumes a record holds whole lines, which the capturing agent
// guarantees outside RAW mode. It tags every line of a record; a record
// that does not end in a newline gets one when its lines are tagged (so the
// next tag starts a line), and stays byte-exact in plain and RAW output.
//
// XML output to the terminal is one well-formed document on Stdout, stderr
// records included (as <stderr> elements), in a root element mpirun's; the
// first Write opens it and Close ends it.
type Display struct {
	cfg   Config
	mu    sync.Mutex
	files map[fileKey]*os.File // open per (proc, stdout|stderr) until its channel completes or Close
	// root is the state of the XML document's root element on the
	// terminal: 0 not written, 1 open, 2 closed (by Close).
	root int
}

// xmlRoot is the element XML output to the terminal is wrapped in, as
// mpirun --xml wraps it: tools that read mpirun's XML read pmixbus's.
const xmlRoot = "mpirun"

// xmlDocument reports whether the output is one XML document on Stdout.
func (d *Display) xmlDocument() bool {
	o := d.cfg.Options
	return o.XML && o.File == "" && o.Dir == ""
}

type fileKey struct {
	cluster, nspace string
	rank            pmix.Rank
	stderr          bool
}

// NewDisplay returns a Display. It returns pmix.ErrBadParam when the options
// contradict each other or a writer the options need is nil.
func NewDisplay(cfg Config) (*Display, error) {
	if err := cfg.Options.validate(); err != nil {
		return nil, err
	}
	toFiles := cfg.Options.File != "" || cfg.Options.Dir != ""
	if !toFiles && (cfg.Stdout == nil || cfg.Stderr == nil) {
		return nil, pmix.Errorf(pmix.ErrBadParam, "iof: Display needs Stdout and Stderr")
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	return &Display{cfg: cfg, files: map[fileKey]*os.File{}}, nil
}

// Write renders one record. STDIN records are ignored; a record with no data
// writes nothing, except in JSON where the end of a channel is an object too.
// A Complete record closes its per-rank file. It returns the writer's or
// the file system's error, and pmix.ErrBadParam for an nspace that cannot
// name a file (empty, ".", "..", or holding '/').
func (d *Display) Write(r Record) error {
	if r.Channel == STDIN {
		return nil
	}
	if len(r.Data) == 0 && !d.cfg.Options.JSON {
		if r.Complete {
			d.mu.Lock()
			defer d.mu.Unlock()
			return d.closeFile(r)
		}
		return nil
	}
	var buf bytes.Buffer
	if d.cfg.Options.JSON {
		if err := appendJSON(&buf, r); err != nil {
			return err
		}
	} else {
		d.render(&buf, r)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w, err := d.sink(r)
	if err != nil {
		return err
	}
	if d.xmlDocument() && d.root == 0 {
		d.root = 1
		if _, err := io.WriteString(w, "<"+xmlRoot+">\n"); err != nil {
			return err
		}
	}
	if _, err = w.Write(buf.Bytes()); err != nil {
		return err
	}
	if r.Complete {
		return d.closeFile(r)
	}
	return nil
}

// closeFile closes the file of a channel that has ended, so a long job does
// not hold a descriptor per finished rank. A later record of the same file
// (the other channel when merged) opens it again, appending.
func (d *Display) closeFile(r Record) error {
	key := fileKey{r.Cluster, r.Nspace, r.Rank, d.toStderr(r.Channel)}
	f, ok := d.files[key]
	if !ok {
		return nil
	}
	delete(d.files, key)
	return f.Close()
}

// Close closes every per-rank file that is still open, ends the XML
// document on Stdout (writing an empty one when nothing was shown), and
// returns the errors of doing so. It is safe to call twice; a Write after
// Close opens its file again, appending.
func (d *Display) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	if d.xmlDocument() && d.root != 2 {
		end := "</" + xmlRoot + ">\n"
		if d.root == 0 {
			end = "<" + xmlRoot + ">\n" + end
		}
		d.root = 2
		if _, err := io.WriteString(d.cfg.Stdout, end); err != nil {
			errs = append(errs, err)
		}
	}
	for k, f := range d.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(d.files, k)
	}
	return errors.Join(errs...)
}

func (d *Display) toStderr(c Channel) bool {
	return c != STDOUT && !d.cfg.Options.Merge && !d.xmlDocument()
}

func (d *Display) sink(r Record) (io.Writer, error) {
	o := d.cfg.Options
	stderr := d.toStderr(r.Channel)
	if o.File == "" && o.Dir == "" {
		if stderr {
			return d.cfg.Stderr, nil
		}
		return d.cfg.Stdout, nil
	}
	key := fileKey{r.Cluster, r.Nspace, r.Rank, stderr}
	if f, ok := d.files[key]; ok {
		return f, nil
	}
	name, err := d.fileName(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o750); err != nil {
		return nil, fmt.Errorf("iof: %w", err)
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("iof: %w", err)
	}
	d.files[key] = f
	return f, nil
}

// fileName is OpenPMIx's: "<file>.<nspace>.<rank>.out|.err" or
// "<dir>/<nspace>/rank.<rank>/stdout|stderr", the rank zero-padded to the
// digits of the job size.
func (d *Display) fileName(k fileKey) (string, error) {
	ns := k.nspace
	if d.cfg.Options.Cluster && k.cluster != "" {
		ns = k.cluster + ":" + ns
	}
	if ns == "" || ns == "." || ns == ".." || strings.ContainsAny(ns, "/\x00") {
		return "", pmix.Errorf(pmix.ErrBadParam, "iof: nspace %s cannot name a file", pmix.Quote(ns))
	}
	digits := 0
	if d.cfg.JobSize != nil {
		if n := d.cfg.JobSize(k.nspace); n > 0 {
			digits = len(strconv.Itoa(n))
		}
	}
	rank := fmt.Sprintf("%0*d", digits, uint32(k.rank))
	if d.cfg.Options.Dir != "" {
		leaf := "stdout"
		if k.stderr {
			leaf = "stderr"
		}
		return filepath.Join(d.cfg.Options.Dir, ns, "rank."+rank, leaf), nil
	}
	ext := ".out"
	if k.stderr {
		ext = ".err"
	}
	return d.cfg.Options.File + "." + ns + "." + rank + ext, nil
}

// render writes r's lines with the tags the options ask for.
func (d *Display) render(buf *bytes.Buffer, r Record) {
	o := d.cfg.Options
	if o.XML {
		open := d.xmlOpen(r)
		forEachLine(r.Data, func(line []byte) {
			buf.WriteString(open)
			xmlEscape(buf, line)
			buf.WriteString("</" + r.Channel.String() + ">\n")
		})
		return
	}
	prefix := d.prefix(r)
	if prefix == "" {
		buf.Write(r.Data)
		return
	}
	forEachLine(r.Data, func(line []byte) {
		buf.WriteString(prefix)
		buf.Write(line)
	})
	if !o.Raw && r.Data[len(r.Data)-1] != '\n' {
		buf.WriteByte('\n')
	}
}

// prefix is OpenPMIx's tag for a line of r, "" when no tag is asked for.
func (d *Display) prefix(r Record) string {
	o := d.cfg.Options
	ch := "<" + r.Channel.String() + ">: "
	var tag string
	switch {
	case o.Tag:
		tag = "[" + d.nsLabel(r, jobid(r.Nspace)) + "," + rankString(r.Rank) + "]" + ch
	case o.TagDetailed:
		ns := jobid(r.Nspace)
		if o.TagFullname {
			ns = r.Nspace
		}
		host, pid := d.source(r)
		tag = "[" + d.nsLabel(r, ns) + "," + rankString(r.Rank) + "][" + host + ":" + pid + "]" + ch
	case o.TagFullname:
		tag = "[" + d.nsLabel(r, r.Nspace) + "," + rankString(r.Rank) + "]" + ch
	case o.Rank:
		tag = "[" + d.nsLabel(r, "") + rankString(r.Rank) + "]" + ch
	}
	if !o.Timestamp {
		return tag
	}
	if tag == "" {
		return "[" + d.ctime(r) + "]" + ch
	}
	return "[" + d.ctime(r) + "]" + tag
}

// nsLabel puts the cluster before ns when the options ask for it; for the
// rank-only tag (ns "") it gives "cluster:".
func (d *Display) nsLabel(r Record, ns string) string {
	if !d.cfg.Options.Cluster || r.Cluster == "" {
		return ns
	}
	return r.Cluster + ":" + ns
}

func (d *Display) xmlOpen(r Record) string {
	o := d.cfg.Options
	var b bytes.Buffer
	b.WriteString("<" + r.Channel.String())
	attr := func(name, value string) {
		b.WriteString(" " + name + "=\"")
		xmlEscapeAttr(&b, value)
		b.WriteString("\"")
	}
	if o.Cluster && r.Cluster != "" {
		attr("cluster", r.Cluster)
	}
	switch {
	case o.Tag && !o.TagFullname:
		attr("jobid", jobid(r.Nspace))
	case o.Tag, o.TagFullname, o.TagDetailed:
		attr("nspace", r.Nspace)
	}
	attr("rank", rankString(r.Rank))
	if o.TagDetailed {
		// OpenPMIx prints `["host":"pid"` here, which no XML parser
		// accepts; these are the same facts as attributes.
		host, pid := d.source(r)
		attr("host", host)
		attr("pid", pid)
	}
	if o.Timestamp {
		attr("timestamp", d.ctime(r))
	}
	b.WriteString(">")
	return b.String()
}

func (d *Display) source(r Record) (host, pid string) {
	if d.cfg.Source != nil {
		if h, p, ok := d.cfg.Source(r.Nspace, r.Rank); ok {
			return h, strconv.Itoa(p)
		}
	}
	return "unknown", "unknown"
}

// ctime is the record's source time; a record without one (a tool that
// did not stamp it) gets the time it is shown, as OpenPMIx always does.
func (d *Display) ctime(r Record) string {
	t := r.Time
	if t.IsZero() {
		t = time.Now()
	}
	return t.In(d.cfg.Location).Format(ctimeLayout)
}

// jobid is the part of an nspace after its last '@', as OpenPMIx's tag
// prints it ("prterun-host-1234@1" → "1").
func jobid(nspace string) string {
	if i := strings.LastIndexByte(nspace, '@'); i >= 0 {
		return nspace[i+1:]
	}
	return nspace
}

func rankString(r pmix.Rank) string {
	if r.Valid() {
		return strconv.FormatUint(uint64(r), 10)
	}
	return r.String()
}

// forEachLine calls fn with each line of data, its '\n' included; the last
// line may lack one.
func forEachLine(data []byte, fn func([]byte)) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			fn(data)
			return
		}
		fn(data[:i+1])
		data = data[i+1:]
	}
}

// xmlEscape writes data as XML 1.0 character data, the text as written:
// & < > as entities; newline, tab and carriage return as character
// references (OpenPMIx's &#010; for the newline, which a parser keeps
// where a literal one would be normalized); valid UTF-8 as it is. What XML
// 1.0 cannot carry at all — a control byte other than those three, a byte
// that is not part of valid UTF-8, U+FFFE or U+FFFF: no character
// reference may name them — becomes an empty element <byte hex="HH"/> for
// each of its bytes, so a reader gets every byte back and the document
// stays well-formed.
func xmlEscape(b *bytes.Buffer, data []byte) {
	for len(data) > 0 {
		c := data[0]
		switch {
		case c == '&':
			b.WriteString("&amp;")
		case c == '<':
			b.WriteString("&lt;")
		case c == '>':
			b.WriteString("&gt;")
		case c == '\n' || c == '\t' || c == '\r':
			fmt.Fprintf(b, "&#%03d;", c)
		case c < 0x20:
			fmt.Fprintf(b, `<byte hex="%02x"/>`, c)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
		default:
			r, size := utf8.DecodeRune(data)
			if r == utf8.RuneError || r == 0xFFFE || r == 0xFFFF {
				for _, x := range data[:size] {
					fmt.Fprintf(b, `<byte hex="%02x"/>`, x)
				}
			} else {
				b.Write(data[:size])
			}
			data = data[size:]
			continue
		}
		data = data[1:]
	}
}

// xmlEscapeAttr writes s as an attribute value: what xmlEscape writes as
// text, with " as &quot;; a character XML 1.0 cannot carry is U+FFFD there
// (no element may stand in an attribute). The values are names: nspaces,
// hosts, clusters.
func xmlEscapeAttr(b *bytes.Buffer, s string) {
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString("&quot;")
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0xFFFE, r == 0xFFFF:
			b.WriteRune(utf8.RuneError)
		default:
			xmlEscape(b, []byte(string(r)))
		}
	}
}

// ReadXML reads a document a Display wrote (--output xml) with a strict
// XML 1.0 parser, and returns its root element's name and the text of its
// records in order, each <byte hex="HH"/> read back as its byte: the bytes
// the processes wrote.
//
// Errors: pmix.ErrBadParam for a document that is not well-formed, has a
// second root or a bad <byte> element.
func ReadXML(r io.Reader) (root string, text []byte, err error) {
	dec := xml.NewDecoder(r)
	var out bytes.Buffer
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return root, out.Bytes(), nil
		}
		if err != nil {
			return "", nil, pmix.Errorf(pmix.ErrBadParam, "iof: not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if root != "" {
					return "", nil, pmix.Errorf(pmix.ErrBadParam, "iof: XML with a second root, %s", pmix.Quote(tok.Name.Local))
				}
				root = tok.Name.Local
			}
			if tok.Name.Local == "byte" {
				var b uint8
				if len(tok.Attr) != 1 || tok.Attr[0].Name.Local != "hex" || len(tok.Attr[0].Value) != 2 {
					return "", nil, pmix.Errorf(pmix.ErrBadParam, "iof: a byte element without hex=\"HH\"")
				}
				if _, err := fmt.Sscanf(tok.Attr[0].Value, "%02x", &b); err != nil {
					return "", nil, pmix.Errorf(pmix.ErrBadParam, "iof: byte element hex=%s: %v", pmix.Quote(tok.Attr[0].Value), err)
				}
				out.WriteByte(b)
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 2 {
				out.Write(tok)
			}
		}
	}
}

// jsonRecord is one line of `--output json`. Data is there when the bytes
// are UTF-8, DataB64 (standard base64) when they are not.
type jsonRecord struct {
	Cluster  string    `json:"cluster"`
	Nspace   string    `json:"nspace"`
	Rank     pmix.Rank `json:"rank"`
	Channel  string    `json:"channel"`
	Seq      uint64    `json:"seq"`
	TS       time.Time `json:"ts"`
	Data     *string   `json:"data,omitempty"`
	DataB64  []byte    `json:"data_b64,omitempty"`
	Complete bool      `json:"complete,omitempty"`
}

func appendJSON(buf *bytes.Buffer, r Record) error {
	j := jsonRecord{Cluster: r.Cluster, Nspace: r.Nspace, Rank: r.Rank, Channel: r.Channel.String(),
		Seq: r.Seq, TS: r.Time.UTC(), Complete: r.Complete}
	if utf8.Valid(r.Data) {
		s := string(r.Data)
		j.Data = &s
	} else {
		j.DataB64 = r.Data
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return enc.Encode(j) // Encode ends the object with '\n'
}

// ParseJSON decodes one line of `--output json` back into a Record. It
// returns pmix.ErrBadParam for a line that is not such an object.
func ParseJSON(line []byte) (Record, error) {
	var j jsonRecord
	if err := json.Unmarshal(line, &j); err != nil {
		return Record{}, pmix.Errorf(pmix.ErrBadParam, "iof: bad json record: %v", err)
	}
	ch, ok := map[string]Channel{"stdin": STDIN, "stdout": STDOUT, "stderr": STDERR, "stddiag": STDDIAG}[j.Channel]
	if !ok {
		return Record{}, pmix.Errorf(pmix.ErrBadParam, "iof: bad json record: channel %s", pmix.Quote(j.Channel))
	}
	r := Record{Cluster: j.Cluster, Nspace: j.Nspace, Rank: j.Rank, Channel: ch, Seq: j.Seq, Time: j.TS, Complete: j.Complete, Data: j.DataB64}
	if j.Data != nil {
		r.Data = []byte(*j.Data)
	}
	return r, nil
}
