package pmix

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Two sentinels of one status, as two packages would define them.
var (
	errClosedA = NewCodedError(ErrInvalidOperation, "a.closed", "a shut down")
	errClosedB = NewCodedError(ErrInvalidOperation, "b.closed", "b shut down")
)

func TestErrorCodes(t *testing.T) {
	wrapped := fmt.Errorf("%w: job x", errClosedA)
	derived := Errorf(ErrInvalidOperation, "serving: %w", wrapped)
	decoded := &Error{Status: StatusOf(derived), Code: CodeOf(derived), Message: MessageOf(derived)}
	cases := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"same sentinel", errClosedA, errClosedA, true},
		{"other sentinel of the same status", errClosedA, errClosedB, false},
		{"wrapped vs its sentinel", wrapped, errClosedA, true},
		{"wrapped vs another sentinel", wrapped, errClosedB, false},
		{"derived vs its sentinel", derived, errClosedA, true},
		{"decoded vs its sentinel", decoded, errClosedA, true},
		{"decoded vs another sentinel", decoded, errClosedB, false},
		{"sentinel vs its bare status", errClosedA, ErrInvalidOperation, true},
		{"decoded vs its bare status", decoded, ErrInvalidOperation, true},
		{"sentinel vs a status-only *Error", errClosedA, ErrInvalidOperation.AsError(), true},
		{"status-only error vs a sentinel", Errorf(ErrInvalidOperation, "x"), errClosedA, false},
		{"bare status vs a sentinel", ErrInvalidOperation, errClosedA, false},
		{"bare status vs a status-only *Error", ErrInvalidOperation, ErrInvalidOperation.AsError(), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := errors.Is(c.err, c.target); got != c.want {
				t.Errorf("errors.Is(%v, %v) = %v", c.err, c.target, got)
			}
		})
	}
	if got := CodeOf(wrapped); got != "a.closed" {
		t.Errorf("CodeOf(wrapped) = %q", got)
	}
	// A sentinel wrapped under another status lends that error no code:
	// decoded, it would match the sentinel but not the sentinel's status.
	if got := CodeOf(Errorf(ErrTimeout, "waiting: %w", errClosedA)); got != "" {
		t.Errorf("CodeOf under another status = %q", got)
	}
	if got := CodeOf(fmt.Errorf("x: %w and %w", errors.New("y"), errClosedB)); got != "b.closed" {
		t.Errorf("CodeOf of a multi-wrap = %q", got)
	}
	if CodeOf(nil) != "" || CodeOf(errors.New("x")) != "" || CodeOf(ErrTimeout) != "" {
		t.Error("CodeOf of errors without a code")
	}
}

// TestErrorStatusOnce: the status name appears once in Error(), however
// the error was wrapped and whatever a peer put in the message.
func TestErrorStatusOnce(t *testing.T) {
	unreach := NewCodedError(ErrUnreach, "x.unreachable", "domain unreachable")
	cases := []struct {
		name      string
		err       error
		text, msg string
	}{
		{"sentinel", unreach, "domain unreachable (PMIX_ERR_UNREACH)", "domain unreachable"},
		{"fmt-wrapped", fmt.Errorf("%w: hub", unreach), "domain unreachable (PMIX_ERR_UNREACH): hub", "domain unreachable: hub"},
		{"Errorf-wrapped", Errorf(ErrUnreach, "lookup: %w", unreach), "lookup: domain unreachable (PMIX_ERR_UNREACH)", "lookup: domain unreachable"},
		{"Errorf of another status", Errorf(ErrTimeout, "lookup: %w", unreach), "lookup: domain unreachable (PMIX_ERR_UNREACH) (PMIX_ERR_TIMEOUT)", "lookup: domain unreachable (PMIX_ERR_UNREACH)"},
		{"a peer's message with the status", &Error{Status: ErrUnreach, Message: "lookup: x (PMIX_ERR_UNREACH)"}, "lookup: x (PMIX_ERR_UNREACH)", "lookup: x"},
		{"bare status", ErrUnreach, "PMIX_ERR_UNREACH", ""},
		{"no message", ErrUnreach.AsError(), "PMIX_ERR_UNREACH", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.err.Error(); got != c.text {
				t.Errorf("Error() = %q, want %q", got, c.text)
			}
			if got := MessageOf(c.err); got != c.msg {
				t.Errorf("MessageOf = %q, want %q", got, c.msg)
			}
			// What a receiver builds from the wire shows the status once.
			got := (&Error{Status: StatusOf(c.err), Message: MessageOf(c.err)}).Error()
			if n := strings.Count(got, "("+StatusOf(c.err).String()+")"); n > 1 {
				t.Errorf("decoded %q names the status %d times", got, n)
			}
		})
	}
}

func TestQuote(t *testing.T) {
	long := strings.Repeat("k", 3000)
	cases := map[string]string{
		"":                            `""`,
		"key":                         `"key"`,
		long:                          `"` + long[:MaxQuoted] + `"…`,
		"a\nb":                        `"a\nb"`,
		strings.Repeat("é", 40):       `"` + strings.Repeat("é", MaxQuoted/2) + `"…`,
		"x" + strings.Repeat("é", 40): `"x` + strings.Repeat("é", (MaxQuoted-1)/2) + `"…`,
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%d bytes) = %s, want %s", len(in), got, want)
		}
	}
}

func TestErrorMsgpackCode(t *testing.T) {
	for _, in := range []*Error{errClosedA, NewError(ErrNotFound, "no key x")} {
		b, err := msgpack.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var out Error
		if err := msgpack.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if out.Status != in.Status || out.Code != in.Code || out.Message != in.Message {
			t.Errorf("round trip of %#v gave %#v", in, out)
		}
		if !errors.Is(&out, in) {
			t.Errorf("decoded %v does not match %v", &out, in)
		}
	}
	// The two-element form of a peer without codes still decodes.
	b, _ := msgpack.Marshal([]any{int32(ErrNotFound), "x"})
	var out Error
	if err := msgpack.Unmarshal(b, &out); err != nil || out.Status != ErrNotFound || out.Code != "" {
		t.Fatalf("two-element form: %v %#v", err, out)
	}
	b, _ = msgpack.Marshal([]any{int32(ErrNotFound), "x", "c", "extra"})
	if err := msgpack.Unmarshal(b, &out); !errors.Is(err, ErrUnpackFailure) {
		t.Fatalf("four elements: %v", err)
	}
}
