package iof

import (
	"strings"

	"github.com/pmixbus/pmixbus/pmix"
)

// Options is a parsed `--output` value: how a Display labels and where it
// sends each line.
type Options struct {
	Tag         bool   // [jobid,rank]<stdout>:
	TagDetailed bool   // [jobid,rank][host:pid]<stdout>:
	TagFullname bool   // [nspace,rank]<stdout>:
	Rank        bool   // [rank]<stdout>:
	Timestamp   bool   // [ctime] before the tag, or timestamp="…" in XML
	XML         bool   // <stdout rank="R">…</stdout>
	JSON        bool   // one JSON object per record (pmixbus only)
	Merge       bool   // stderr and stddiag go where stdout goes
	Raw         bool   // records are shown as they come: no newline is added
	Cluster     bool   // prefix the cluster; the launcher sets it when a run spans clusters, where ranks are ambiguous
	File        string // PATH.<nspace>.<rank>.out|.err instead of the terminal
	Dir         string // DIR/<nspace>/rank.<N>/stdout|stderr instead of the terminal
}

// directives are the names ParseOutput accepts, in the order its errors list
// them. PRRTE's are first; json and cluster are pmixbus's own.
var directives = []string{
	"tag", "tag-detailed", "tag-fullname", "rank", "timestamp", "xml",
	"merge-stderr-to-stdout", "file", "dir", "raw", "json", "cluster",
}

// ParseOutput parses the value of `pmixbus run --output` in PRRTE's syntax:
// a comma-separated list of directives, case-insensitive, each shortened to
// any unique prefix ("tag" and the other exact names always win). Booleans
// accept "=1/0", "=t/y/true/yes/enable" and "=f/n/false/no/disable"; file
// and dir need "=PATH". The empty string is the default: plain output.
//
// It returns pmix.ErrBadParam for an unknown or ambiguous directive (the
// message lists the valid ones), a bad value, or two directives that
// contradict each other (json with xml, timestamp or any tag; file with
// dir; two tag styles other than tag-detailed with tag-fullname).
func ParseOutput(spec string) (Options, error) {
	var o Options
	if strings.TrimSpace(spec) == "" {
		return o, nil
	}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		name, value, hasValue := strings.Cut(item, "=")
		dir, err := matchDirective(name)
		if err != nil {
			return Options{}, err
		}
		if dir == "file" || dir == "dir" {
			if !hasValue || value == "" {
				return Options{}, pmix.Errorf(pmix.ErrBadParam, "--output %s needs a value: %s=PATH", dir, dir)
			}
			if dir == "file" {
				o.File = value
			} else {
				o.Dir = value
			}
			continue
		}
		on := true
		if hasValue {
			if on, err = parseBool(dir, value); err != nil {
				return Options{}, err
			}
		}
		for _, b := range o.bools() {
			if b.name == dir {
				*b.on = on
			}
		}
	}
	return o, o.validate()
}

// boolDirective ties a boolean directive's name to its field.
type boolDirective struct {
	name string
	on   *bool
}

func (o *Options) bools() []boolDirective {
	return []boolDirective{
		{"tag", &o.Tag}, {"tag-detailed", &o.TagDetailed}, {"tag-fullname", &o.TagFullname},
		{"rank", &o.Rank}, {"timestamp", &o.Timestamp}, {"xml", &o.XML},
		{"merge-stderr-to-stdout", &o.Merge}, {"raw", &o.Raw}, {"json", &o.JSON}, {"cluster", &o.Cluster},
	}
}

func (o Options) validate() error {
	set := map[string]bool{"file": o.File != "", "dir": o.Dir != ""}
	for _, b := range o.bools() {
		set[b.name] = *b.on
	}
	// Each pair is refused; tag-detailed with tag-fullname is OpenPMIx's
	// detailed tag with the full nspace, so it is not among them.
	styles := []string{"tag", "tag-detailed", "tag-fullname", "rank"}
	var pairs [][2]string
	pairs = append(pairs, [2]string{"file", "dir"})
	for _, other := range []string{"xml", "tag", "tag-detailed", "tag-fullname", "rank", "timestamp"} {
		pairs = append(pairs, [2]string{"json", other})
	}
	for i, a := range styles {
		for _, b := range styles[i+1:] {
			if a != "tag-detailed" || b != "tag-fullname" {
				pairs = append(pairs, [2]string{a, b})
			}
		}
	}
	for _, p := range pairs {
		if set[p[0]] && set[p[1]] {
			return pmix.Errorf(pmix.ErrBadParam, "--output: %s and %s cannot be used together", p[0], p[1])
		}
	}
	return nil
}

func matchDirective(name string) (string, error) {
	lower := strings.ToLower(strings.TrimSpace(name))
	if lower == "" {
		return "", pmix.Errorf(pmix.ErrBadParam, "--output: empty directive; valid: %s", strings.Join(directives, ", "))
	}
	var found []string
	for _, d := range directives {
		if d == lower {
			return d, nil
		}
		if strings.HasPrefix(d, lower) {
			found = append(found, d)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", pmix.Errorf(pmix.ErrBadParam, "--output: unknown directive %s; valid: %s", pmix.Quote(name), strings.Join(directives, ", "))
	}
	return "", pmix.Errorf(pmix.ErrBadParam, "--output: directive %s is ambiguous: %s", pmix.Quote(name), strings.Join(found, ", "))
}

func parseBool(dir, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "t", "y", "true", "yes", "enable":
		return true, nil
	case "0", "f", "n", "false", "no", "disable":
		return false, nil
	}
	return false, pmix.Errorf(pmix.ErrBadParam, "--output %s=%s: want 1/0, true/false, yes/no or enable/disable", dir, pmix.Quote(v))
}
