package iof

import (
	"encoding/binary"
	"errors"
	"testing"
)

// ompiHelp packs a help message as Open MPI 4.1's orte_show_help does.
func ompiHelp(file, topic string, text *string) []byte {
	var b []byte
	i32 := func(n int) { b = binary.BigEndian.AppendUint32(b, uint32(n)) }
	str := func(s string) {
		i32(1)
		i32(len(s) + 1)
		b = append(append(b, s...), 0)
	}
	str(file)
	str(topic)
	i32(1)
	if text == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	str(*text)
	return b
}

func TestParseOMPIHelp(t *testing.T) {
	text := "MPI_ABORT was invoked on rank 1\n"
	h, got, err := ParseOMPIHelp(ompiHelp("help-mpi-api.txt", "mpi-abort", &text))
	if err != nil || h != (Help{File: "help-mpi-api.txt", Topic: "mpi-abort"}) || got != text {
		t.Fatalf("%+v %q %v", h, got, err)
	}
	h, got, err = ParseOMPIHelp(ompiHelp("f", "t", nil))
	if err != nil || h.Topic != "t" || got != "" {
		t.Fatalf("without text: %+v %q %v", h, got, err)
	}
	good := ompiHelp("f", "t", &text)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-3],
		"trailing":  append(good[:len(good):len(good)], 0),
		"no file":   ompiHelp("", "t", &text),
		"count 2":   append([]byte{0, 0, 0, 2}, good[4:]...),
		"no nul":    func() []byte { c := append([]byte(nil), good...); c[len(c)-1] = 'x'; return c }(),
		"huge len":  append([]byte{0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff}, good[8:]...),
		"negative":  append([]byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}, good[8:]...),
	} {
		if _, _, err := ParseOMPIHelp(b); !errors.Is(err, ErrBadOMPIHelp) {
			t.Errorf("%s: %v, want ErrBadOMPIHelp", name, err)
		}
	}
}

func FuzzParseOMPIHelp(f *testing.F) {
	text := "text\n"
	f.Add(ompiHelp("help-mpi-api.txt", "mpi-abort", &text))
	f.Add(ompiHelp("f", "t", nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, text, err := ParseOMPIHelp(b)
		if err != nil {
			return
		}
		if h.File == "" || h.Topic == "" || len(text) > len(b) {
			t.Fatalf("accepted %q: %+v %q", b, h, text)
		}
	})
}
