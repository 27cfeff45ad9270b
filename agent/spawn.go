package agent

import (
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/proto"
)

// PMIx_Spawn (the spawn frame): the request goes to the launcher of the
// client's job (package launch, spawn.go), which starts the new job as it
// started the client's; the reply carries its nspace once every rank has
// started, or the launcher's error.
func (cc *clientConn) spawn(f *proto.Frame) {
	apps := make([]launch.SpawnApp, len(f.Apps))
	for i, a := range f.Apps {
		apps[i] = launch.SpawnApp{Cmd: a.Cmd, Argv: a.Argv, Env: a.Env, Dir: a.Cwd, MaxProcs: int(a.MaxProcs), Info: a.Info}
	}
	req, err := launch.ParseSpawn(cc.entry.proc, f.Info, apps)
	if err != nil {
		cc.reply(f, err, nil)
		return
	}
	run := func() {
		ns, info, err := launch.RequestChild(cc.a.ctx, cc.a.nc, cc.a.cfg.Cluster, req)
		if err == nil {
			cc.a.spawned.Add(ns, info)
		}
		r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq, Nspace: ns}
		r.SetErr(err)
		_ = cc.write(r) // not cc.reply: see publishLookup
	}
	if !cc.a.goFunc(run) {
		cc.reply(f, ErrClosed, nil)
	}
}
