package client

import (
	"context"
	"errors"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// RFC0002's internal client events never leave the process: the client
// raises them in its own registry, for the application's handlers of those
// codes (and its default handlers, which RFC0002 does not set apart):
//
//   - pmix.LostServerConnection (PMIX_ERR_LOST_CONNECTION, -61): the
//     connection to the agent ended (connectionEnded).
//   - pmix.FailedComm (PMIX_ERR_COMM_FAILURE, -49, RFC0002's
//     PMIX_ERR_FAILED_COMM): "a message from the local server could not be
//     correctly unpacked" (failedComm).

// internalEvent is an internal event of this process, with msg as its text.
func (c *Client) internalEvent(code pmix.Status, msg string) bus.Event {
	return bus.Event{
		Code:   code,
		Source: c.self,
		Range:  pmix.RangeProcLocal,
		Info:   []pmix.Info{pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(msg))},
	}
}

// undecodable reports whether a read error is a frame the client could not
// decode (an *pmix.Error from the codec) rather than the stream failing.
func undecodable(err error) bool {
	var pe *pmix.Error
	return errors.As(err, &pe)
}

// inStep reports whether the reader is still at a frame boundary after the
// undecodable frame err: it read the whole body and only its content was
// wrong. A length over the limit leaves the body unread, and the stream
// cannot be followed past it.
func inStep(err error) bool { return pmix.StatusOf(err) != proto.ErrFrameTooLarge }

// failedComm raises pmix.FailedComm for a frame from the agent that could
// not be decoded, the stream being still in step. The frame is lost: a
// reply in it leaves its request waiting until its context ends, an
// invocation in it is passed over by the agent's timeout. The chain runs
// off the reading goroutine, so that its handlers may call the client.
func (c *Client) failedComm(err error) {
	c.mu.Lock()
	final := c.final
	c.mu.Unlock()
	if final {
		return
	}
	ev := c.commFailure(err)
	c.async(func(context.Context) { c.local.Notify(ev, nil) })
}

// commFailure logs an undecodable frame and returns its internal event.
func (c *Client) commFailure(err error) bus.Event {
	msg := "undecodable frame from the agent: " + err.Error()
	c.log.Warn(msg)
	return c.internalEvent(pmix.FailedComm, msg)
}
