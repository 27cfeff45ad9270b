package client

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

func TestInitErrors(t *testing.T) {
	full := map[string]string{EnvNspace: "j", EnvRank: "0", EnvAgent: "unix:/nonexistent/pmixbus.sock", EnvCredential: "00"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range full {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name   string
		env    map[string]string
		status pmix.Status
		says   string
	}{
		{"nothing set", map[string]string{}, pmix.ErrInit, "PMIX_NAMESPACE, PMIX_RANK, PMIXBUS_AGENT, PMIXBUS_CREDENTIAL unset"},
		{"no credential", with(EnvCredential, ""), pmix.ErrInit, "PMIXBUS_CREDENTIAL unset"},
		{"bad rank", with(EnvRank, "-1"), pmix.ErrInit, "PMIX_RANK"},
		{"bad agent address", with(EnvAgent, "udp:x"), pmix.ErrInit, "want unix:/path or tcp:host:port"},
		{"no agent there", full, pmix.ErrUnreach, "attaching to the agent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Init(context.Background(), WithEnv(c.env))
			if !errors.Is(err, c.status) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v; want %v saying %q", err, c.status, c.says)
			}
		})
	}
	if _, err := Init(context.Background(), WithEnv(nil)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("nil env: %v", err)
	}
}
