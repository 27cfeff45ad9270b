package client

import (
	"context"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/query"
)

// Query asks the agent what PMIx_Query_info asks (docs/cabi.md lists the
// keys answered): each query's keys under its qualifiers (PMIX_NSPACE,
// …). It returns one Info per key answered, the key as asked, in the
// order asked.
//
// Errors: pmix.QueryPartialSuccess, with the answers found, when some
// keys have none; pmix.ErrNotFound when no key has one (an unknown key is
// not found, as OpenPMIx answers it); PMIX_ERR_BAD_PARAM for no key;
// ErrLostConnection; PMIX_ERR_TIMEOUT if ctx ends first.
func (c *Client) Query(ctx context.Context, queries []query.Query) ([]pmix.Info, error) {
	var asked []pmix.Info
	for _, q := range queries {
		for _, k := range q.Keys {
			asked = append(asked, pmix.NewInfo(k, pmix.Infos(q.Qualifiers)))
		}
	}
	if len(asked) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "a query with no key")
	}
	r, err := c.request(ctx, &proto.Frame{Type: proto.TypeQuery, Info: asked})
	if r == nil {
		return nil, err
	}
	return r.Info, err
}

// QueryCB is the callback form of Query (PMIx_Query_info_nb).
func (c *Client) QueryCB(queries []query.Query, cb func([]pmix.Info, error)) {
	c.async(func(ctx context.Context) { cb(c.Query(ctx, queries)) })
}
