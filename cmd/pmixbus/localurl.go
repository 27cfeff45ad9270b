package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// The local NATS: an agent that runs an embedded server writes its URL to
// a file in the keys directory (private to the user, found without
// flags), so that `pmixbus run` and `pmixbus status` reach it with no
// --nats. PMIXBUS_NATS and --nats win over it; without any, the tools
// try NATS's default URL.

// localURLFile is the file in keys dir dir.
func localURLFile(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, "nats.url")
}

func writeLocalURL(file, url string) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(url+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// removeLocalURL removes the file if it still names url (another agent
// may have started since).
func removeLocalURL(file, url string) {
	if b, err := os.ReadFile(file); err == nil && bytes.Equal(bytes.TrimSpace(b), []byte(url)) {
		_ = os.Remove(file)
	}
}

// localNATSFlag declares --nats for a tool that finds the local NATS by
// itself: what applyLocalNATS resolves.
func localNATSFlag(fs *flag.FlagSet, of string) *string {
	return fs.String("nats", "", "NATS `URL` of any server "+of+" (PMIXBUS_NATS; default: the local agent's embedded server, else "+nats.DefaultURL+")")
}

// applyLocalNATS gives a --nats flag declared by localNATSFlag its value
// when the command line did not: PMIXBUS_NATS, else localNATS.
func applyLocalNATS(fs *flag.FlagSet, url *string) error {
	if err := (envBindings{"nats": "PMIXBUS_NATS"}).apply(fs); err != nil {
		return err
	}
	if *url == "" {
		*url = localNATS()
	}
	return nil
}

// localNATS is the URL a tool uses when neither --nats nor PMIXBUS_NATS
// gave one.
func localNATS() string {
	if f := localURLFile(defaultKeysDir()); f != "" {
		if b, err := os.ReadFile(f); err == nil {
			if u := strings.TrimSpace(string(b)); u != "" && len(u) < 1024 {
				return u
			}
		}
	}
	return nats.DefaultURL
}
