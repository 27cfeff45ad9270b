package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/nats-io/nats-server/v2/server"
)

// LevelTrace is the slog level NATS protocol traces are logged at. It sits
// below slog.LevelDebug, so a logger only sees traces when asked for them.
const LevelTrace = slog.LevelDebug - 4

// natsLogger routes an embedded nats-server's logging to a *slog.Logger,
// and keeps the first error it logs.
type natsLogger struct {
	log   *slog.Logger
	first *firstError
}

var _ server.Logger = natsLogger{}

// firstError is the first error a server logged: why it did not start
// ("Error listening on port: 127.0.0.1:4222, \"…: address already in use\"").
type firstError struct {
	mu  sync.Mutex
	msg string
}

func (f *firstError) set(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.msg == "" {
		f.msg = msg
	}
}

// String is the error, "" when none was logged.
func (f *firstError) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

// attachLogger makes ns log to log, enabling nats-server's debug and trace
// output only when log would keep them. A nil log leaves ns silent: an
// embedded server that was never given a logger logs nothing. Either way
// the first error ns logs is kept in the returned firstError, for the
// error of a server that did not start.
func attachLogger(ns *server.Server, log *slog.Logger) *firstError {
	first := &firstError{}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx := context.Background()
	ns.SetLoggerV2(natsLogger{log: log, first: first},
		log.Enabled(ctx, slog.LevelDebug),
		log.Enabled(ctx, LevelTrace),
		false)
	return first
}

func (l natsLogger) logf(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, fmt.Sprintf(format, v...))
}

func (l natsLogger) Noticef(format string, v ...any) { l.logf(slog.LevelInfo, format, v) }
func (l natsLogger) Warnf(format string, v ...any)   { l.logf(slog.LevelWarn, format, v) }
func (l natsLogger) Errorf(format string, v ...any) {
	l.first.set(fmt.Sprintf(format, v...))
	l.logf(slog.LevelError, format, v)
}
func (l natsLogger) Debugf(format string, v ...any) { l.logf(slog.LevelDebug, format, v) }
func (l natsLogger) Tracef(format string, v ...any) { l.logf(LevelTrace, format, v) }

// Fatalf logs at error level and, unlike nats-server's own loggers, does not
// exit: an embedding process decides for itself when to stop.
func (l natsLogger) Fatalf(format string, v ...any) {
	l.first.set(fmt.Sprintf(format, v...))
	l.logf(slog.LevelError, format, v)
}
