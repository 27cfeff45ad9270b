package client

import (
	"context"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// JobControl asks the launch service to act on targets, as
// PMIx_Job_control does: directives pmix.KeyJobCtrlKill (end them at
// once), KeyJobCtrlTerminate (SIGTERM, SIGKILL after the agent's kill
// grace), KeyJobCtrlSignal (an int: send that signal), KeyJobCtrlPause
// and KeyJobCtrlResume (SIGSTOP, SIGCONT). No targets is the caller's
// whole job; a rank of pmix.RankWildcard every rank of its job. The
// targets must belong to jobs with ranks on the caller's node. A request
// that only informs (KeyJobCtrlID, KeyJobCtrlPreemptible, the checkpoint
// methods) is accepted and does nothing. It returns once every agent
// concerned has acted; a caller among the targets of a kill is ended
// last. The results are always empty.
//
// Errors: PMIX_ERR_BAD_PARAM for a malformed directive or two actions;
// PMIX_ERR_NOT_SUPPORTED for another request (checkpoint, restart, the
// cleanup requests) or an agent that does not launch; PMIX_ERR_NOT_FOUND
// for a target of a job without ranks on this node; ErrLostConnection.
func (c *Client) JobControl(ctx context.Context, targets []pmix.Proc, directives []pmix.Info) ([]pmix.Info, error) {
	own := make([]pmix.Proc, len(targets))
	for i, t := range targets {
		if t.Nspace == "" {
			t.Nspace = c.proc.Nspace // an empty nspace is the caller's
		}
		own[i] = t
	}
	r, err := c.request(ctx, &proto.Frame{Type: proto.TypeJobControl, Procs: own, Info: directives})
	if err != nil {
		return nil, err
	}
	return r.Info, nil
}

// JobControlCB is the callback form of JobControl (PMIx_Job_control_nb).
func (c *Client) JobControlCB(targets []pmix.Proc, directives []pmix.Info, cb func([]pmix.Info, error)) {
	c.async(func(ctx context.Context) { cb(c.JobControl(ctx, targets, directives)) })
}
