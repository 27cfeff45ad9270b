package proto

import (
	"math"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/pmixbus/pmixbus/pmix"
)

// MaxSpawnApps bounds the app contexts of one spawn frame; beyond it the
// frame does not decode.
const MaxSpawnApps = 1 << 10

// App is one app context of a spawn frame, pmix_app_t as PMIx_Spawn takes
// it. On the wire: [cmd: str, argv: [str], env: [str], cwd: str,
// maxprocs: uint, info: Infos].
type App struct {
	Cmd      string
	Argv     []string
	Env      []string // "NAME=value"
	Cwd      string
	MaxProcs uint32
	Info     []pmix.Info
}

func encodeApps(enc *msgpack.Encoder, apps []App) error {
	if err := enc.EncodeArrayLen(len(apps)); err != nil {
		return err
	}
	strs := func(ss []string) error {
		if err := enc.EncodeArrayLen(len(ss)); err != nil {
			return err
		}
		for _, s := range ss {
			if err := enc.EncodeString(s); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range apps {
		if err := enc.EncodeArrayLen(6); err != nil {
			return err
		}
		if err := enc.EncodeString(a.Cmd); err != nil {
			return err
		}
		if err := strs(a.Argv); err != nil {
			return err
		}
		if err := strs(a.Env); err != nil {
			return err
		}
		if err := enc.EncodeString(a.Cwd); err != nil {
			return err
		}
		if err := enc.EncodeUint(uint64(a.MaxProcs)); err != nil {
			return err
		}
		if err := pmix.EncodeInfos(enc, a.Info); err != nil {
			return err
		}
	}
	return nil
}

// decodeApps reads what encodeApps wrote. Lengths were checked against
// the bytes present (decodeChecked); allocations grow as elements arrive.
func decodeApps(dec *msgpack.Decoder) ([]App, error) {
	const field = "frame field " + kApps
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return nil, bad(field, err)
	}
	if n > MaxSpawnApps {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "%s: %d apps, at most %d", field, n, MaxSpawnApps)
	}
	strs := func() ([]string, error) {
		m, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, bad(field, err)
		}
		var out []string
		for range m {
			s, err := dec.DecodeString()
			if err != nil {
				return nil, bad(field, err)
			}
			out = append(out, s)
		}
		return out, nil
	}
	var out []App
	for range n {
		m, err := dec.DecodeArrayLen()
		if err != nil {
			return nil, bad(field, err)
		}
		if m != 6 {
			return nil, pmix.Errorf(pmix.ErrUnpackFailure, "%s: want [cmd, argv, env, cwd, maxprocs, info], got %d elements", field, m)
		}
		var a App
		if a.Cmd, err = dec.DecodeString(); err != nil {
			return nil, bad(field, err)
		}
		if a.Argv, err = strs(); err != nil {
			return nil, err
		}
		if a.Env, err = strs(); err != nil {
			return nil, err
		}
		if a.Cwd, err = dec.DecodeString(); err != nil {
			return nil, bad(field, err)
		}
		mp, err := pmix.DecodeUint(dec, math.MaxUint32, "maxprocs")
		if err != nil {
			return nil, pmix.Errorf(pmix.ErrUnpackFailure, "%s: %v", field, pmix.MessageOf(err))
		}
		a.MaxProcs = uint32(mp)
		if a.Info, err = pmix.DecodeInfos(dec); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
