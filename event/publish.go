package event

import (
	"github.com/nats-io/nats.go"

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
	return PublishWith(nc, m, scopes, nil)
}

// PublishWith is Publish with more headers on every message (an agent
// sending an event again after an outage marks it).
func PublishWith(nc Publisher, m *Message, scopes []subjects.Scope, extra nats.Header) error {
	b, err := m.Marshal()
	if err != nil {
		return pmix.Errorf(pmix.ErrPackFailure, "encoding event: %w", err)
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
	multi := len(scopes) > 1
	// Checked before any is sent: a server drops the connection over a
	// subject too long for its protocol line.
	for _, subj := range subjs {
		if err := subjects.CheckSubject(subj); err != nil {
			return err
		}
	}
	for i, subj := range subjs {
		hdr := nats.Header{jetstream.MsgIDHeader: []string{m.ID}}
		if multi {
			hdr.Set(jetstream.MsgIDHeader, MsgID(m.ID, scopes[i]))
		}
		for k, v := range extra {
			hdr[k] = v
		}
		if err := nc.PublishMsg(&nats.Msg{Subject: subj, Header: hdr, Data: b}); err != nil {
			return pmix.Errorf(pmix.ErrUnreach, "publishing %v to %s: %w", m.Code, subj, err)
		}
	}
	return nil
}

// MsgID is the Nats-Msg-Id of event id published to scope sc among
// others (a CUSTOM event for ranks on several nodes goes to each node's
// agent scope): the id and the scope, so the streams keep one message per
// scope, each replayable and retained on its node, while the same event
// sent again to the same scope is still a duplicate. An event published to
// one scope has its own id.
func MsgID(id string, sc subjects.Scope) string { return id + "@" + sc.Prefix() }
