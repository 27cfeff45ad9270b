package launch

import (
	"fmt"
	"maps"
	"os/user"
	"slices"
	"strconv"

	"github.com/pmixbus/pmixbus/pmix"
)

// JobUser is the user an agent that runs as root starts ranks as
// (DaemonConfig.JobUser, pmixbus agent --job-user): the ranks then cannot
// read what only root may, the agent's key files among them
// (docs/security.md, "Who can read which key").
type JobUser struct {
	Name     string
	UID, GID uint32
	Groups   []uint32
	Home     string
}

// LookupJobUser returns the user named name (or a numeric uid) with its
// groups.
//
// Errors: pmix.ErrBadParam for an unknown user or root.
func LookupJobUser(name string) (*JobUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil, pmix.Errorf(pmix.ErrBadParam, "job user %s: %v", pmix.Quote(name), err)
		}
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, pmix.Errorf(pmix.ErrBadParam, "job user %s: uid %s, gid %s are not numbers", pmix.Quote(name), u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "job user %s is root: ranks would read every key", pmix.Quote(name))
	}
	ju := &JobUser{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil && !slices.Contains(ju.Groups, uint32(g)) {
				ju.Groups = append(ju.Groups, uint32(g))
			}
		}
	}
	return ju, nil
}

// String names the user and its ids.
func (u *JobUser) String() string { return fmt.Sprintf("%s (uid %d, gid %d)", u.Name, u.UID, u.GID) }

// env is what a rank of the user sees of itself.
func (u *JobUser) env() map[string]string {
	return map[string]string{"USER": u.Name, "LOGNAME": u.Name, "HOME": u.Home}
}

// secretEnv names the agent's environment variables a rank does not
// inherit: where the keys are (security.EnvKeysDir).
var secretEnv = []string{"PMIXBUS_KEYS"}

// joinEnv is a and b in one map, b's entries winning.
func joinEnv(a, b map[string]string) map[string]string {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, b)
	return out
}
