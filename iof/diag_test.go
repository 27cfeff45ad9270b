package iof

import (
	"context"
	"errors"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// A help message is stored with its file and topic before DiagStored's wait
// returns, so it comes before the end of the process's stdout and stderr
// in the stream; a plain diagnostic has no help headers.
func TestDiagStored(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true})
	src, err := svc.Source(pmix.Proc{Nspace: "job", Rank: 1}, SourceOptions{Incarnation: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	c := follow(t, nc, "job")
	if _, err := src.DiagStored(nil, []byte("plain\n")); err != nil {
		t.Fatal(err)
	}
	wait, err := src.DiagStored(&Help{File: "help-x.txt", Topic: "oops"}, []byte("help text\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	recs := c.completes(t, 3)
	var diag []Parsed
	for i, r := range recs {
		if r.Channel != STDDIAG {
			if r.Complete && len(diag) < 2 {
				t.Errorf("the %v channel ended (record %d) before the diagnostics were stored", r.Channel, i)
			}
			continue
		}
		diag = append(diag, r)
	}
	if len(diag) != 3 || string(diag[0].Data) != "plain\n" || diag[0].Help != nil ||
		string(diag[1].Data) != "help text\n" || diag[1].Help == nil || *diag[1].Help != (Help{File: "help-x.txt", Topic: "oops"}) ||
		!diag[2].Complete || diag[1].Seq != 2 {
		t.Fatalf("diag records %+v", diag)
	}
	if _, err := src.DiagStored(nil, []byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("DiagStored after Close: %v, want ErrClosed", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	other, _ := svc.Source(pmix.Proc{Nspace: "job", Rank: 2}, SourceOptions{Incarnation: "i1"})
	defer other.Close()
	wait, err = other.DiagStored(nil, []byte("x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(ctx); err != nil && pmix.StatusOf(err) != pmix.ErrTimeout {
		t.Errorf("DiagStored with an ended context: %v, want nil or PMIX_ERR_TIMEOUT", err)
	}
}

// A diag-only Source writes only diag records: its Close claims nothing
// about stdout and stderr, which another launcher holds.
func TestDiagOnly(t *testing.T) {
	svc, nc := openService(t, ServiceConfig{Memory: true})
	src, err := svc.Source(pmix.Proc{Nspace: "rm", Rank: 0}, SourceOptions{Incarnation: "c1", DiagOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	c := follow(t, nc, "rm")
	if n, err := src.Stdout().Write([]byte("discarded\n")); n != 10 || err != nil {
		t.Errorf("Stdout().Write = %d, %v", n, err)
	}
	wait, err := src.DiagStored(nil, []byte("logged\n"))
	if err == nil {
		err = wait(t.Context())
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	recs := c.completes(t, 1)
	if len(recs) != 2 || recs[0].Channel != STDDIAG || string(recs[0].Data) != "logged\n" || recs[1].Channel != STDDIAG || !recs[1].Complete {
		t.Fatalf("records %+v", recs)
	}
}
