package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// Control sends op with body req to node's agent of cluster c and decodes
// its answer into reply (a *SpawnReply, *Reply, *JobsReply; nil: a Reply,
// whose error is returned).
//
// Errors: ErrNoAgent when no agent answers (none runs on the node, or it
// did not answer within ctx); pmix.ErrNoPermissions when the connection
// may not send control requests; the error the agent replied with.
func Control(ctx context.Context, nc *nats.Conn, c cluster.ID, node, op string, req, reply any) error {
	var body []byte
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return pmix.Errorf(pmix.ErrPackFailure, "%s request: %v", op, err)
		}
	}
	m, err := request(ctx, nc, controlSubjectOf(c, node, op, req), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%w: no agent of node %s in cluster %s answers %s requests%w", ErrNoAgent, node, c, op, noResponders)
	case errors.Is(err, errRefused):
		return pmix.Errorf(pmix.ErrNoPermissions, "%v (launching takes the launcher key, see docs/security.md)", nc.LastError())
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%w: node %s of cluster %s did not answer a %s request in time", ErrNoAgent, node, c, op)
	case errors.Is(err, nats.ErrPermissionViolation) || errors.Is(err, nats.ErrAuthorization):
		return pmix.Errorf(pmix.ErrNoPermissions, "sending a %s request to node %s: %v (launching takes the launcher key, see docs/security.md)", op, node, err)
	case err != nil:
		return pmix.Errorf(pmix.ErrUnreach, "%s request to node %s of cluster %s: %v", op, node, c, err)
	}
	if reply == nil {
		reply = &Reply{}
	}
	if err := decode(m.Data, reply); err != nil {
		return err
	}
	if r, ok := reply.(interface{ Err() error }); ok {
		return r.Err() // a Reply or a SpawnReply: the agent's error
	}
	return nil
}

// flushTimeout bounds request's flush when its context has no deadline.
const flushTimeout = 10 * time.Second

// errRefused: the server refused the request's publish (request).
var errRefused = errors.New("refused by the server")

// request is nc.RequestWithContext, but a publish the server refuses
// fails at once (errRefused) instead of when ctx ends: the server answers
// a refused publish with nothing but an asynchronous -ERR, which comes
// before the PONG of a flush sent after it (nc.LastError then holds it).
func request(ctx context.Context, nc *nats.Conn, subj string, body []byte) (*nats.Msg, error) {
	inbox := nc.NewInbox() // the connection's inbox prefix, as its permissions allow
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := sub.AutoUnsubscribe(1); err != nil {
		return nil, err
	}
	before := nc.LastError()
	if err := nc.PublishRequest(subj, inbox, body); err != nil {
		return nil, err
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok { // FlushWithContext wants one
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, flushTimeout)
		defer cancel()
	}
	if err := nc.FlushWithContext(fctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if last := nc.LastError(); last != before && errors.Is(last, nats.ErrPermissionViolation) &&
		(strings.Contains(last.Error(), subj) || strings.Contains(last.Error(), inbox)) {
		return nil, errRefused
	}
	return sub.NextMsgWithContext(ctx)
}

// noResponders marks a request nobody received (nats.ErrNoResponders),
// which a caller may send again without its being acted on twice; it
// adds nothing to the message.
var noResponders = quietError{nats.ErrNoResponders}

type quietError struct{ error }

func (quietError) Error() string   { return "" }
func (e quietError) Unwrap() error { return e.error }

// refused is pmix.ErrNoPermissions when the server refused the
// connection a subject starting with prefix: a refused publish gets no
// answer, and the server says why only asynchronously (LastError).
func refused(nc *nats.Conn, prefix string) error {
	last := nc.LastError()
	if last == nil || !strings.Contains(last.Error(), "Permissions Violation") || !strings.Contains(last.Error(), prefix) {
		return nil
	}
	return pmix.Errorf(pmix.ErrNoPermissions, "%v (launching takes the launcher key, see docs/security.md)", last)
}
