package main

/*
#cgo CFLAGS: -I${SRCDIR}/include
#include <stdlib.h>
#include "pmix.h"
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/pmixbus/pmixbus/pmix"
)

// Conversions between C PMIx data and the pmix package's. Everything made
// for C is C-allocated (C.CString, C.calloc), so the application frees it
// with the PMIx macros; nothing made for Go points into C memory.

// goString reads a fixed-size C char array (a key, an nspace) up to its
// first NUL.
func goString(p *C.char, max int) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), max)
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// putString copies s into a fixed-size C char array, truncated and
// NUL-padded as PMIX_LOAD_KEY does.
func putString(p *C.char, max int, s string) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), max)
	clear(b)
	copy(b[:max-1], s)
}

func goProc(p *C.pmix_proc_t) pmix.Proc {
	return pmix.Proc{Nspace: goString(&p.nspace[0], len(p.nspace)), Rank: pmix.Rank(p.rank)}
}

func putProc(p *C.pmix_proc_t, g pmix.Proc) {
	putString(&p.nspace[0], len(p.nspace), g.Nspace)
	p.rank = C.pmix_rank_t(g.Rank)
}

// goInfos converts a C info array. Entries whose type has no pmix.Value
// counterpart (pointers, topologies, …: nothing that can leave the
// process) are left out.
func goInfos(info *C.pmix_info_t, n C.size_t) []pmix.Info {
	if info == nil || n == 0 {
		return nil
	}
	in := unsafe.Slice(info, int(n))
	out := make([]pmix.Info, 0, len(in))
	for i := range in {
		v, ok := goValue(&in[i].value)
		if !ok {
			continue
		}
		out = append(out, pmix.Info{Key: goString(&in[i].key[0], len(in[i].key)), Value: v, Flags: pmix.Directive(in[i].flags) & pmix.InfoRequired})
	}
	return out
}

func goValue(v *C.pmix_value_t) (pmix.Value, bool) {
	p := unsafe.Pointer(&v.data)
	switch v._type {
	case C.PMIX_UNDEF:
		return pmix.Value{}, true
	case C.PMIX_BOOL:
		return pmix.Bool(bool(*(*C.bool)(p))), true
	case C.PMIX_STRING:
		s := *(**C.char)(p)
		if s == nil {
			return pmix.String(""), true
		}
		return pmix.String(C.GoString(s)), true
	case C.PMIX_BYTE, C.PMIX_UINT8:
		return pmix.Uint8(*(*uint8)(p)), true
	case C.PMIX_INT8:
		return pmix.Int8(*(*int8)(p)), true
	case C.PMIX_INT16:
		return pmix.Int16(*(*int16)(p)), true
	case C.PMIX_INT, C.PMIX_INT32, C.PMIX_PID:
		return pmix.Int32(*(*int32)(p)), true
	case C.PMIX_INT64:
		return pmix.Int64(*(*int64)(p)), true
	case C.PMIX_UINT16:
		return pmix.Uint16(*(*uint16)(p)), true
	case C.PMIX_UINT, C.PMIX_UINT32:
		return pmix.Uint32(*(*uint32)(p)), true
	case C.PMIX_SIZE, C.PMIX_UINT64:
		return pmix.Uint64(*(*uint64)(p)), true
	case C.PMIX_FLOAT:
		return pmix.Float64(float64(*(*float32)(p))), true
	case C.PMIX_DOUBLE:
		return pmix.Float64(*(*float64)(p)), true
	case C.PMIX_TIME:
		return pmix.Time(time.Unix(*(*int64)(p), 0)), true
	case C.PMIX_TIMEVAL:
		tv := (*[2]int64)(p)
		return pmix.Time(time.Unix(tv[0], tv[1]*1000)), true
	case C.PMIX_STATUS:
		return pmix.StatusValue(pmix.Status(*(*int32)(p))), true
	case C.PMIX_PROC_RANK:
		return pmix.RankValue(pmix.Rank(*(*uint32)(p))), true
	case C.PMIX_PERSIST:
		return pmix.PersistValue(pmix.Persistence(*(*uint8)(p))), true
	case C.PMIX_DATA_RANGE:
		return pmix.RangeValue(pmix.Range(*(*uint8)(p))), true
	case C.PMIX_PROC:
		pp := *(**C.pmix_proc_t)(p)
		if pp == nil {
			return pmix.Value{}, false
		}
		return pmix.ProcValue(goProc(pp)), true
	case C.PMIX_BYTE_OBJECT, C.PMIX_COMPRESSED_STRING:
		bo := (*C.pmix_byte_object_t)(p)
		if bo.bytes == nil {
			return pmix.Bytes(nil), true
		}
		return pmix.Bytes(C.GoBytes(unsafe.Pointer(bo.bytes), C.int(bo.size))), true
	case C.PMIX_DATA_ARRAY:
		da := *(**C.pmix_data_array_t)(p)
		if da == nil {
			return pmix.Value{}, false
		}
		switch da._type {
		case C.PMIX_PROC:
			procs := make([]pmix.Proc, int(da.size))
			if da.size > 0 {
				for i, cp := range unsafe.Slice((*C.pmix_proc_t)(da.array), int(da.size)) {
					procs[i] = goProc(&cp)
				}
			}
			return pmix.Procs(procs), true
		case C.PMIX_INFO:
			return pmix.Infos(goInfos((*C.pmix_info_t)(da.array), da.size)), true
		}
	}
	return pmix.Value{}, false
}

// newCInfos returns infos as a C array made as PMIX_INFO_CREATE makes one
// (the last element flagged PMIX_INFO_ARRAY_END); nil for none.
func newCInfos(infos []pmix.Info) (*C.pmix_info_t, C.size_t) {
	if len(infos) == 0 {
		return nil, 0
	}
	arr := (*C.pmix_info_t)(C.calloc(C.size_t(len(infos)), C.sizeof_pmix_info_t))
	out := unsafe.Slice(arr, len(infos))
	for i, in := range infos {
		putInfo(&out[i], in)
	}
	out[len(out)-1].flags |= C.PMIX_INFO_ARRAY_END
	return arr, C.size_t(len(infos))
}

func putInfo(c *C.pmix_info_t, in pmix.Info) {
	putString(&c.key[0], len(c.key), in.Key)
	c.flags = C.pmix_info_directives_t(in.Flags)
	putKeyValue(&c.value, in.Key, in.Value)
}

// putValue stores g in v, which must hold nothing that needs freeing.
func putValue(v *C.pmix_value_t, g pmix.Value) {
	clear(v.data[:])
	p := unsafe.Pointer(&v.data)
	set := func(t C.pmix_data_type_t) { v._type = t }
	switch g.Type() {
	case pmix.TypeBool:
		b, _ := g.Bool()
		*(*C.bool)(p) = C.bool(b)
		set(C.PMIX_BOOL)
	case pmix.TypeString:
		s, _ := g.Str()
		*(**C.char)(p) = C.CString(s)
		set(C.PMIX_STRING)
	case pmix.TypeInt8, pmix.TypeInt16, pmix.TypeInt32, pmix.TypeInt64:
		n, _ := g.Int()
		switch g.Type() {
		case pmix.TypeInt8:
			*(*int8)(p) = int8(n)
			set(C.PMIX_INT8)
		case pmix.TypeInt16:
			*(*int16)(p) = int16(n)
			set(C.PMIX_INT16)
		case pmix.TypeInt32:
			*(*int32)(p) = int32(n)
			set(C.PMIX_INT32)
		default:
			*(*int64)(p) = n
			set(C.PMIX_INT64)
		}
	case pmix.TypeUint8, pmix.TypeUint16, pmix.TypeUint32:
		n, _ := g.Int()
		switch g.Type() {
		case pmix.TypeUint8:
			*(*uint8)(p) = uint8(n)
			set(C.PMIX_UINT8)
		case pmix.TypeUint16:
			*(*uint16)(p) = uint16(n)
			set(C.PMIX_UINT16)
		default:
			*(*uint32)(p) = uint32(n)
			set(C.PMIX_UINT32)
		}
	case pmix.TypeUint64:
		n, _ := g.Int() // above MaxInt64 the accessor says !ok, but the bits are right
		*(*uint64)(p) = uint64(n)
		set(C.PMIX_UINT64)
	case pmix.TypeFloat64:
		f, _ := g.Float64()
		*(*float64)(p) = f
		set(C.PMIX_DOUBLE)
	case pmix.TypeTime:
		t, _ := g.Time()
		*(*int64)(p) = t.Unix()
		set(C.PMIX_TIME)
	case pmix.TypeStatus:
		s, _ := g.Status()
		*(*int32)(p) = int32(s)
		set(C.PMIX_STATUS)
	case pmix.TypeRank:
		r, _ := g.Rank()
		*(*uint32)(p) = uint32(r)
		set(C.PMIX_PROC_RANK)
	case pmix.TypePersistence:
		r, _ := g.Persistence()
		*(*uint8)(p) = uint8(r)
		set(C.PMIX_PERSIST)
	case pmix.TypeRange:
		r, _ := g.Range()
		*(*uint8)(p) = uint8(r)
		set(C.PMIX_DATA_RANGE)
	case pmix.TypeProc:
		pr, _ := g.Proc()
		cp := (*C.pmix_proc_t)(C.calloc(1, C.sizeof_pmix_proc_t))
		putProc(cp, pr)
		*(**C.pmix_proc_t)(p) = cp
		set(C.PMIX_PROC)
	case pmix.TypeBytes:
		b, _ := g.Bytes()
		bo := (*C.pmix_byte_object_t)(p)
		if len(b) > 0 {
			bo.bytes = (*C.char)(C.CBytes(b))
			bo.size = C.size_t(len(b))
		}
		set(C.PMIX_BYTE_OBJECT)
	case pmix.TypeProcArray:
		procs, _ := g.Procs()
		da := (*C.pmix_data_array_t)(C.calloc(1, C.sizeof_pmix_data_array_t))
		da._type = C.PMIX_PROC
		if len(procs) > 0 {
			arr := (*C.pmix_proc_t)(C.calloc(C.size_t(len(procs)), C.sizeof_pmix_proc_t))
			for i, pr := range procs {
				putProc(&unsafe.Slice(arr, len(procs))[i], pr)
			}
			da.array = unsafe.Pointer(arr)
			da.size = C.size_t(len(procs))
		}
		*(**C.pmix_data_array_t)(p) = da
		set(C.PMIX_DATA_ARRAY)
	case pmix.TypeInfoArray:
		infos, _ := g.Infos()
		da := (*C.pmix_data_array_t)(C.calloc(1, C.sizeof_pmix_data_array_t))
		da._type = C.PMIX_INFO
		arr, n := newCInfos(infos)
		da.array, da.size = unsafe.Pointer(arr), n
		*(**C.pmix_data_array_t)(p) = da
		set(C.PMIX_DATA_ARRAY)
	default:
		set(C.PMIX_UNDEF)
	}
}

// goStrings reads a NULL-terminated C argv.
func goStrings(argv **C.char) []string {
	var out []string
	if argv == nil {
		return nil
	}
	for p := argv; *p != nil; p = (**C.char)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(p))) {
		out = append(out, C.GoString(*p))
	}
	return out
}
