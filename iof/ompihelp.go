package iof

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxOMPIHelp bounds the blob ParseOMPIHelp reads: a rendered help
// message is a few KiB.
const MaxOMPIHelp = 64 << 10

// ErrBadOMPIHelp is the error of a PMIX_LOG_MSG blob that is not Open
// MPI's show-help message.
var ErrBadOMPIHelp = errors.New("iof: not an Open MPI help message")

// ParseOMPIHelp reads the PMIX_LOG_MSG byte object that Open MPI 4.1's
// orte_show_help logs from a rank (PMIx_Log_nb, no directives) and that
// mpirun's server relays to its show-help aggregator: an OPAL DSS buffer,
// not described, holding the help file, the topic, a flag saying whether
// a rendered text follows, and that text — each value a count (int32, 1)
// then the value, a string as its length (int32, the NUL included) and
// its bytes, big-endian. It returns the help message and its text; text
// is empty when the rank sent none (orte_show_help_suppress), which
// mpirun renders from its own help files and pmixbus cannot.
//
// Errors: ErrBadOMPIHelp, wrapped with what is wrong, for anything else
// or a blob over MaxOMPIHelp bytes.
func ParseOMPIHelp(b []byte) (help Help, text string, err error) {
	if len(b) > MaxOMPIHelp {
		return Help{}, "", fmt.Errorf("%w: %d bytes, at most %d", ErrBadOMPIHelp, len(b), MaxOMPIHelp)
	}
	d := dss{b: b}
	help.File = d.str()
	help.Topic = d.str()
	have := d.int8()
	if have != 0 {
		text = d.str()
	}
	switch {
	case d.err != nil:
		return Help{}, "", d.err
	case len(d.b) != 0:
		return Help{}, "", fmt.Errorf("%w: %d bytes after its values", ErrBadOMPIHelp, len(d.b))
	case help.File == "" || help.Topic == "":
		return Help{}, "", fmt.Errorf("%w: no help file or topic", ErrBadOMPIHelp)
	}
	return help, text, nil
}

// dss reads values of a non-described OPAL DSS buffer, one at a time; the
// first error sticks.
type dss struct {
	b   []byte
	err error
}

func (d *dss) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("%w: %s of %d bytes, %d left", ErrBadOMPIHelp, what, n, len(d.b))
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dss) int32() int32 {
	v := d.take(4, "an int32")
	if v == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(v))
}

// count reads a value's count, which must be 1.
func (d *dss) count() {
	if n := d.int32(); d.err == nil && n != 1 {
		d.err = fmt.Errorf("%w: a count of %d values, want 1", ErrBadOMPIHelp, n)
	}
}

func (d *dss) str() string {
	d.count()
	n := d.int32()
	if n == 0 {
		return "" // a NULL string
	}
	v := d.take(int(n), "a string")
	if v == nil {
		return ""
	}
	if v[len(v)-1] != 0 {
		d.err = fmt.Errorf("%w: a string without its NUL", ErrBadOMPIHelp)
		return ""
	}
	return string(v[:len(v)-1])
}

func (d *dss) int8() int8 {
	d.count()
	v := d.take(1, "an int8")
	if v == nil {
		return 0
	}
	return int8(v[0])
}
