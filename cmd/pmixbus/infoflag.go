package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pmixbus/pmixbus/pmix"
)

// infoSyntax documents --info for the commands that take it.
const infoSyntax = `
An --info value is key=value for a string, or key:type=value for another
type: bool, int (int64), int32, uint8, uint16, uint32, uint64, float
(float64), status (a PMIx name or number), range (a PMIx range name or
number), rank (a number, '*' or 'undef'), proc (nspace.rank) or procs
(nspace.rank,nspace.rank,...). For example:

    --info pmix.evtext="node n3 is gone"
    --info pmix.job.size:uint32=16 --info pmix.evproc:proc=job1.3
    --info pmix.evnondef:bool=true --info my.ratio:float=0.5`

// parseInfo parses one --info value (see infoSyntax).
func parseInfo(s string) (pmix.Info, error) {
	lhs, val, ok := strings.Cut(s, "=")
	if !ok {
		return pmix.Info{}, fmt.Errorf("info %q: want key=value or key:type=value", s)
	}
	key, typ := lhs, "string"
	if i := strings.LastIndexByte(lhs, ':'); i >= 0 {
		key, typ = lhs[:i], strings.ToLower(lhs[i+1:])
	}
	if key == "" {
		return pmix.Info{}, fmt.Errorf("info %q: empty key", s)
	}
	v, err := parseValue(typ, val)
	if err != nil {
		return pmix.Info{}, fmt.Errorf("info %q: %v", s, err)
	}
	return pmix.NewInfo(key, v), nil
}

func parseValue(typ, s string) (pmix.Value, error) {
	uint := func(bits int, mk func(uint64) pmix.Value) (pmix.Value, error) {
		n, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return pmix.Value{}, fmt.Errorf("%s value %q: want an unsigned %d-bit number", typ, s, bits)
		}
		return mk(n), nil
	}
	switch typ {
	case "string", "str":
		return pmix.String(s), nil
	case "bool":
		b, err := strconv.ParseBool(s)
		if err != nil {
			return pmix.Value{}, fmt.Errorf("bool value %q: want true or false", s)
		}
		return pmix.Bool(b), nil
	case "int", "int64", "int32":
		bits := 64
		if typ == "int32" {
			bits = 32
		}
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return pmix.Value{}, fmt.Errorf("%s value %q: want a signed %d-bit number", typ, s, bits)
		}
		if bits == 32 {
			return pmix.Int32(int32(n)), nil
		}
		return pmix.Int64(n), nil
	case "uint8":
		return uint(8, func(n uint64) pmix.Value { return pmix.Uint8(uint8(n)) })
	case "uint16":
		return uint(16, func(n uint64) pmix.Value { return pmix.Uint16(uint16(n)) })
	case "uint32":
		return uint(32, func(n uint64) pmix.Value { return pmix.Uint32(uint32(n)) })
	case "uint64", "uint":
		return uint(64, pmix.Uint64)
	case "float", "float64":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return pmix.Value{}, fmt.Errorf("float value %q: want a finite number", s)
		}
		return pmix.Float64(f), nil
	case "status":
		st, err := pmix.ParseStatus(s)
		if err != nil {
			return pmix.Value{}, err
		}
		return pmix.StatusValue(st), nil
	case "range":
		r, err := pmix.ParseRange(s)
		if err != nil {
			return pmix.Value{}, err
		}
		return pmix.RangeValue(r), nil
	case "rank":
		r, err := pmix.ParseRank(s)
		if err != nil {
			return pmix.Value{}, err
		}
		return pmix.RankValue(r), nil
	case "proc":
		p, err := pmix.ParseProc(s)
		if err != nil {
			return pmix.Value{}, err
		}
		return pmix.ProcValue(p), nil
	case "procs":
		ps, err := parseProcs(strings.Split(s, ","))
		if err != nil {
			return pmix.Value{}, err
		}
		return pmix.Procs(ps), nil
	}
	return pmix.Value{}, fmt.Errorf("unknown type %q: want string, bool, int, int32, uint8, uint16, uint32, uint64, float, status, range, rank, proc or procs", typ)
}

func parseProcs(ss []string) ([]pmix.Proc, error) {
	out := make([]pmix.Proc, 0, len(ss))
	for _, s := range ss {
		p, err := pmix.ParseProc(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}
