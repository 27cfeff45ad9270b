// Package event is what travels on NATS between agents, and the rules that
// put it there: the event message (Message) and its wire form, the outcome
// reports of handler chains (OutcomeReport) and their subject, publishing
// an event (Publish), and the data-range rules — which scopes an event is
// published on (Scopes) and which local clients an arriving event is for
// (ClientScopes, For). The rules are pure functions of their arguments, so
// agents, `pmixbus notify` and tests share one copy.
//
//	m := &event.Message{ID: id, Code: pmix.EventNodeDown, Range: pmix.RangeLocal, Environment: true,
//		Source: bus.Origin{Cluster: "A", Node: "n1"}, Time: time.Now()}
//	scopes, err := event.Scopes(event.Place{Cluster: "A", Node: "n1"}, m, nil, nil)
//	err = event.Publish(nc, m, scopes) // pmix.env.A.node.n1.-231
//
// docs/subjects.md describes the subjects and the message's wire form.
//
// Everything here is safe for concurrent use; a Message is not modified
// after it is published.
package event
