package event

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Publisher is the part of a NATS connection that publishing needs;
// *nats.Conn is one.
type Publisher interface {
	PublishMsg(*nats.Msg) error
}

// Publish sends an event to the given scopes (see Scopes): on each
// scope's subject, or its transient subject when the event carries
// PMIX_EVENT_DO_NOT_CACHE, with MsgID in the Nats-Msg-Id header. Once:
// the event cache's streams capture a cacheable event, and the events
// stream copies a job event to the job-events stream itself (see package
// jetstream).
//
// Errors: pmix.ErrPackFailure if m cannot be encoded; pmix.ErrBadParam for
// a subject over subjects.MaxSubjectLen (nothing is sent then);
// pmix.ErrUnreach if NATS refused a publish.
func Publish(nc Publisher, m *Message, scopes []subjects.Scope) error {
	b, subjs, err := Encode(m, scopes)
	if err != nil {
		return err
	}
	return PublishEncoded(nc, m, scopes, b, subjs)
}

// PublishEncoded is Publish of what Encode returned for m and scopes.
func PublishEncoded(nc Publisher, m *Message, scopes []subjects.Scope, b []byte, subjs []string) error {
	for i, subj := range subjs {
		hdr := nats.Header{jetstream.MsgIDHeader: []string{MsgID(m.ID, scopes[i])}}
		if err := nc.PublishMsg(&nats.Msg{Subject: subj, Header: hdr, Data: b}); err != nil {
			return pmix.Errorf(pmix.ErrUnreach, "publishing %v to %s: %w", m.Code, subj, err)
		}
	}
	return nil
}

// Encode returns m's body and its subject in each scope, all checked.
func Encode(m *Message, scopes []subjects.Scope) ([]byte, []string, error) {
	b, err := m.Marshal()
	if err != nil {
		return nil, nil, pmix.Errorf(pmix.ErrPackFailure, "encoding event: %w", err)
	}
	transient := pmix.Flag(m.Info, pmix.KeyEventDoNotCache)
	var subjs []string
	for _, sc := range scopes {
		if transient {
			subjs = append(subjs, sc.TransientSubject(m.Code))
			continue
		}
		subjs = append(subjs, sc.Subject(m.Code))
	}
	// Checked before any is sent: a server drops the connection over a
	// subject too long for its protocol line.
	for _, subj := range subjs {
		if err := subjects.CheckSubject(subj); err != nil {
			return nil, nil, err
		}
	}
	return b, subjs, nil
}

// PublishStored sends a cacheable event to scope sc as Publish does, and
// waits until the events stream of cluster has stored it: a JetStream
// publish, which expects that stream (Nats-Expected-Stream). A tool
// outside the agents sends a GLOBAL event so: only its origin cluster's
// events stream captures it (the others source it from there), so an
// event no stream stored reached nobody, and the tool must say so.
//
// Errors: those of Publish; pmix.ErrUnreach, naming the stream, when no
// stream answered (no cluster of that name reachable from nc, or its
// agents never started) or another stream did, or ctx ended first.
func PublishStored(ctx context.Context, nc *nats.Conn, m *Message, sc subjects.Scope, cluster string) error {
	if pmix.Flag(m.Info, pmix.KeyEventDoNotCache) {
		return pmix.Errorf(pmix.ErrBadParam, "an event that may not be cached (PMIX_EVENT_DO_NOT_CACHE) is stored by no stream")
	}
	b, subjs, err := Encode(m, []subjects.Scope{sc})
	if err != nil {
		return err
	}
	js, err := natsjs.New(nc)
	if err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "publishing %v: %w", m.Code, err)
	}
	stream := jetstream.EventStreamName(cluster)
	msg := &nats.Msg{Subject: subjs[0], Header: nats.Header{jetstream.MsgIDHeader: []string{MsgID(m.ID, sc)}}, Data: b}
	switch _, err := js.PublishMsg(ctx, msg, natsjs.WithExpectStream(stream)); {
	case errors.Is(err, natsjs.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return pmix.Errorf(pmix.ErrUnreach, "no event cache stored %v on %s: no stream %s answered (is cluster %s reachable from here, and do its agents run?)", m.Code, subjs[0], stream, cluster)
	case err != nil:
		return pmix.Errorf(pmix.ErrUnreach, "publishing %v to %s for stream %s: %w", m.Code, subjs[0], stream, err)
	}
	return nil
}

// MsgID is the Nats-Msg-Id of event id published to scope sc: the id and
// the scope. A CUSTOM event for ranks on several nodes goes to each node's
// agent scope, and the streams keep one message per scope, each replayable
// and retained on its node; the same event sent again to the same scope,
// by whichever agent and however many other scopes it went to, is still a
// duplicate (agents that all raise a node's end send the same ids).
func MsgID(id string, sc subjects.Scope) string { return id + "@" + sc.Prefix() }
