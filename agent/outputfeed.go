package agent

import (
	"net"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// feedStall bounds how long one record may wait for a launcher's socket
// on the direct output path: a launcher that does not read is dropped
// (it takes the records from NATS, and attaches again), so that it
// cannot hold up a rank's output for longer.
const feedStall = 50 * time.Millisecond

// outputFeed is a launcher attached to the agent's socket for its job's
// output (launch/direct.go): the records of the job's ranks here are
// written to it as the iof service numbers them, from the channels' own
// goroutines, without a hand-off.
type outputFeed struct {
	c    net.Conn
	mu   sync.Mutex
	buf  []byte
	dead bool
}

// feedOutput serves a connection whose first frame is an output-attach:
// a launcher on this node, which proves it launched the job with the
// job's output token. It returns when the launcher closes, or is dropped.
func (cc *clientConn) feedOutput(f *proto.Frame) {
	d := cc.a.launcher.Load()
	var err error
	if d == nil || cc.a.output == nil {
		err = pmix.Errorf(pmix.ErrNotSupported, "agent of node %s captures no output of jobs it launches", cc.a.cfg.Node)
	} else {
		err = d.CheckOutputToken(f.Nspace, f.Credential)
	}
	if err != nil {
		// Debug: a launcher tries again each second while its job runs.
		cc.logger().Debug("a launcher's output attach refused", "nspace", f.Nspace, "err", err)
		cc.fail(err)
		return
	}
	fd := &outputFeed{c: cc.c}
	fd.mu.Lock() // the reply goes out before any record
	fd.write(&proto.Frame{Type: proto.TypeReply, Seq: f.Seq})
	stop := cc.a.output.Tap(f.Nspace, fd.deliver)
	fd.mu.Unlock()
	defer stop()
	cc.logger().Debug("a launcher attached for its job's output", "nspace", f.Nspace)
	// The launcher sends nothing more: a byte, or the end, ends the feed.
	var one [1]byte
	_, _ = cc.c.Read(one[:])
}

// deliver writes one record, from the channel's goroutine (iof.Tap).
func (fd *outputFeed) deliver(r iof.Record) {
	fd.mu.Lock()
	defer fd.mu.Unlock()
	fd.write(recordFrame(0, r.Nspace, r, true))
}

// write sends f within feedStall, else drops the launcher. fd.mu held.
func (fd *outputFeed) write(f *proto.Frame) {
	if fd.dead {
		return
	}
	var err error
	if fd.buf, err = proto.AppendFrame(fd.buf[:0], f); err == nil {
		_ = fd.c.SetWriteDeadline(time.Now().Add(feedStall))
		_, err = fd.c.Write(fd.buf)
	}
	if cap(fd.buf) > 64<<10 {
		fd.buf = nil
	}
	if err != nil {
		fd.dead = true
		_ = fd.c.Close() // the reader in feedOutput returns, and stops the tap
	}
}

// recordFrame is an iof-data frame of rec, from source (nspace, or
// cluster:nspace), for pull id (0: the direct output path); with help, a
// help message's file and topic ride along (PMIX_LOG_KEY, PMIX_LOG_VAL).
func recordFrame(id uint64, source string, rec iof.Record, help bool) *proto.Frame {
	info := []pmix.Info{pmix.NewInfo(pmix.KeyIOFTime, pmix.Time(rec.Time))}
	if rec.Complete {
		info = append(info, pmix.NewInfo(pmix.KeyIOFComplete, pmix.Bool(true)))
	}
	if help && rec.Help != nil {
		info = append(info, pmix.NewInfo(pmix.KeyLogKey, pmix.String(rec.Help.File)), pmix.NewInfo(pmix.KeyLogVal, pmix.String(rec.Help.Topic)))
	}
	return &proto.Frame{Type: proto.TypeIOFData, ID: id, Seq: rec.Seq, Source: pmix.Proc{Nspace: source, Rank: rec.Rank},
		Channels: uint16(rec.Channel), Payload: rec.Data, Info: info}
}
