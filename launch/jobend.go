package launch

import (
	"context"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// CachedJobEnd reads the PMIX_EVENT_JOB_END of job nspace of cluster c
// from the cluster's event cache (the last one on its subject, by direct
// get): what a watcher started after the job ended sees. It returns the
// subject it was published on and the event, or nil when the cache holds
// none (the job runs, or its end was evicted).
//
// Errors: pmix.ErrUnreach when the cluster's cache cannot be read;
// pmix.ErrUnpackFailure for a cached message that does not parse.
func CachedJobEnd(ctx context.Context, nc *nats.Conn, c cluster.ID, nspace string) (string, *event.Message, error) {
	subj := subjects.Namespace(string(c), nspace).Subject(pmix.EventJobEnd)
	// A direct get of the last message on a subject, named in the API
	// subject itself: no stream info, no consumer (and no permission
	// beyond reading events, which the watch role has).
	api := "$JS." + c.Domain() + ".API.DIRECT.GET." + jetstream.EventStreamName(string(c)) + "." + subj
	raw, err := nc.RequestWithContext(ctx, api, nil)
	if err != nil {
		if rerr := refused(nc, "DIRECT.GET"); rerr != nil {
			return "", nil, rerr
		}
		return "", nil, pmix.Errorf(pmix.ErrUnreach, "reading the event cache of cluster %s: %v", c, err)
	}
	if st := raw.Header.Get("Status"); st != "" {
		if st == "404" {
			return "", nil, nil
		}
		return "", nil, pmix.Errorf(pmix.ErrUnreach, "reading the event cache of cluster %s: status %s %s", c, st, raw.Header.Get("Description"))
	}
	m, err := event.UnmarshalMessage(raw.Data)
	if err != nil {
		return "", nil, err
	}
	return subj, m, nil
}
