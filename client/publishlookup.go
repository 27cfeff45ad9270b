package client

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// PData is one value Lookup found (pmix_pdata_t): the process that
// published it — "cluster:nspace" when it runs in another cluster — the
// key and the value.
type PData = proto.PData

// Publish publishes data, as PMIx_Publish does. info mixes the data with
// its directives: PMIX_RANGE (default PMIX_RANGE_SESSION), PMIX_PERSISTENCE
// (default PMIX_PERSIST_APP), PMIX_ACCESS_PERMISSIONS (an info array of
// PMIX_ACCESS_USERIDS / PMIX_ACCESS_GRPIDS, comma-separated ids; by default
// only this process's user and group may read), PMIX_TIMEOUT, and for
// PMIX_RANGE_CUSTOM the procs that may read under PMIX_EVENT_CUSTOM_RANGE.
// Every other info is a key and its value. The agent stamps this process
// as the publisher.
//
// Errors: PMIX_ERR_DUPLICATE_KEY when a key is already published in the
// same range scope (then nothing of this call is published);
// PMIX_ERR_BAD_PARAM; PMIX_ERR_UNREACH when the data's bucket cannot be
// reached (GLOBAL data while the hub is cut off); ErrLostConnection.
func (c *Client) Publish(ctx context.Context, info []pmix.Info) error {
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypePublish, Info: info})
	return err
}

// PublishCB is the callback form of Publish: it returns at once and calls
// cb from another goroutine.
func (c *Client) PublishCB(info []pmix.Info, cb func(error)) {
	c.async(func(ctx context.Context) { cb(c.Publish(ctx, info)) })
}

// Lookup looks keys up, as PMIx_Lookup does. Directives: PMIX_RANGE (accept
// only publishers within that range of this process; none means any),
// PMIX_WAIT (an int: wait until that many values are found, 0 for all),
// PMIX_TIMEOUT (seconds; PMIX_ERR_TIMEOUT after it), and for
// PMIX_RANGE_CUSTOM the accepted publishers under PMIX_EVENT_CUSTOM_RANGE.
// A PMIX_WAIT lookup without PMIX_TIMEOUT gets one from ctx's deadline, so
// the agent stops waiting when the caller does.
//
// It returns the values found, in the order of keys. The error is nil when
// all were found, and otherwise PMIX_ERR_PARTIAL_SUCCESS (the values found
// come with it), PMIX_ERR_NOT_FOUND, PMIX_ERR_NO_PERMISSIONS (keys exist in
// range but their permissions exclude this process), PMIX_ERR_TIMEOUT (the
// values found by then come with it), PMIX_ERR_UNREACH, PMIX_ERR_BAD_PARAM,
// or ErrLostConnection.
func (c *Client) Lookup(ctx context.Context, keys []string, directives []pmix.Info) ([]PData, error) {
	directives = withDeadline(ctx, directives)
	r, err := c.request(ctx, &proto.Frame{Type: proto.TypeLookup, Keys: keys, Info: directives})
	if r == nil {
		return nil, err
	}
	return r.Data, err
}

// LookupCB is the callback form of Lookup.
func (c *Client) LookupCB(keys []string, directives []pmix.Info, cb func([]PData, error)) {
	c.async(func(ctx context.Context) { cb(c.Lookup(ctx, keys, directives)) })
}

// Unpublish removes what this process published under keys, or everything
// it published when keys is empty, as PMIx_Unpublish does. Directives:
// PMIX_RANGE (only that range's scope; none means every range),
// PMIX_TIMEOUT. Only the publisher may unpublish.
//
// Errors: PMIX_ERR_NOT_FOUND, PMIX_ERR_NO_PERMISSIONS (another process
// published the key), PMIX_ERR_PARTIAL_SUCCESS (some keys were removed),
// PMIX_ERR_UNREACH, PMIX_ERR_BAD_PARAM, ErrLostConnection.
func (c *Client) Unpublish(ctx context.Context, keys []string, directives []pmix.Info) error {
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeUnpublish, Keys: keys, Info: directives})
	return err
}

// UnpublishCB is the callback form of Unpublish.
func (c *Client) UnpublishCB(keys []string, directives []pmix.Info, cb func(error)) {
	c.async(func(ctx context.Context) { cb(c.Unpublish(ctx, keys, directives)) })
}

// withDeadline adds PMIX_TIMEOUT, from ctx's deadline rounded up to whole
// seconds, to a PMIX_WAIT lookup that has none: otherwise the agent would
// keep waiting after the caller gave up.
func withDeadline(ctx context.Context, directives []pmix.Info) []pmix.Info {
	dl, ok := ctx.Deadline()
	if !ok || !waits(directives) {
		return directives
	}
	if _, given := pmix.Lookup(directives, pmix.KeyTimeout); given {
		return directives
	}
	secs := math.Ceil(time.Until(dl).Seconds())
	secs = max(1, min(secs, math.MaxInt32))
	return append(slices.Clip(directives), pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(int32(secs))))
}

func waits(directives []pmix.Info) bool {
	v, ok := pmix.LookupValue(directives, pmix.KeyWait)
	if !ok {
		return false
	}
	if b, isBool := v.Bool(); isBool {
		return b
	}
	return true
}
