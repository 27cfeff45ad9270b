package agent

import (
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// jobControl serves a job-control frame (PMIx_Job_control): the launch
// service carries out a kill, terminate, signal, pause or resume of the
// targets (launch.Daemon.JobControl), on a goroutine of the agent's, and
// the reply comes once every agent concerned has acted; a request that
// only informs is answered at once.
func (cc *clientConn) jobControl(f *proto.Frame) {
	act, err := launch.ParseJobControl(f.Info)
	if err != nil || act == nil {
		cc.reply(f, err, nil)
		return
	}
	d := cc.a.launcher.Load()
	if d == nil {
		cc.reply(f, pmix.Errorf(pmix.ErrNotSupported, "job control: node %s does not launch processes", cc.a.cfg.Node), nil)
		return
	}
	caller := cc.entry.proc
	if !cc.a.goFunc(func() { cc.reply(f, d.JobControl(cc.a.ctx, caller, f.Procs, *act), nil) }) {
		cc.reply(f, ErrClosed, nil)
	}
}
