package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// version is pmixbus's version. Release builds set it with
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/pmixbus
//
// Otherwise it comes from the module version in the build info (set by
// "go install module@version"), or is "dev".
var version string

func init() {
	register(&command{
		name:    "version",
		summary: "print the versions of pmixbus, nats-server and nats.go",
		run:     runVersion,
	})
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "", "Print the versions of pmixbus, the embedded nats-server, nats.go and Go.")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	fmt.Fprintf(stdout, "pmixbus %s\nnats-server v%s\nnats.go v%s\n%s\n",
		pmixbusVersion(), server.VERSION, nats.Version, runtime.Version())
	return exitOK
}

func pmixbusVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
