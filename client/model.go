package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// modelKeys are the keys of PMIx_Init's info that declare a programming
// model.
var modelKeys = []string{pmix.KeyProgrammingModel, pmix.KeyModelLibraryName, pmix.KeyModelLibraryVersion, pmix.KeyThreadingModel}

// WithInitInfo gives Init the info PMIx_Init takes. pmixbus reads the
// model declaration in it (PMIX_PROGRAMMING_MODEL,
// PMIX_MODEL_LIBRARY_NAME, PMIX_MODEL_LIBRARY_VERSION,
// PMIX_THREADING_MODEL, strings): Init then raises
// pmix.EventModelDeclared (PMIX_MODEL_DECLARED) in the process with them,
// and a handler registered later for that code by name is called with it
// once, as OpenPMIx's cache of local events does. Other keys are ignored.
func WithInitInfo(info []pmix.Info) Option {
	return func(o *options) error {
		for _, in := range info {
			if !slices.Contains(modelKeys, in.Key) {
				continue
			}
			if _, ok := in.Value.Str(); !ok {
				return fmt.Errorf("%w: %s: %v is not a string", ErrInvalidOption, in.Key, in.Value)
			}
			o.model = append(o.model, in)
		}
		return nil
	}
}

// declareModel raises PMIX_MODEL_DECLARED with the model declared at
// Init, and keeps it for handlers registered later.
func (c *Client) declareModel(model []pmix.Info) {
	if len(model) == 0 {
		return
	}
	c.model = model
	c.local.Notify(c.modelEvent(), nil)
}

func (c *Client) modelEvent() bus.Event {
	return bus.Event{Code: pmix.EventModelDeclared, Source: c.self, Range: pmix.RangeProcLocal, Info: slices.Clone(c.model)}
}

// replayModel calls a new registration id for codes with the model
// declared at Init, if it names PMIX_MODEL_DECLARED: on a goroutine of its
// own, so that the handler runs after the registering call returned.
func (c *Client) replayModel(id bus.ID, codes []pmix.Status) {
	if len(c.model) == 0 || !slices.Contains(codes, pmix.EventModelDeclared) {
		return
	}
	c.async(func(context.Context) { _ = c.local.Replay(id, c.modelEvent(), nil) })
}
