package client

import (
	"context"
	"os"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// App is one app context of Spawn (pmix_app_t): the program, its argv
// (Argv[0] included, as PMIx has it; nil: the program alone), NAME=value
// entries added to its environment, its working directory (empty: this
// process's), its number of ranks, and its directives (PMIX_HOST,
// PMIX_HOSTFILE, PMIX_MAPBY, PMIX_WDIR, PMIXBUS_SPAWN_CLUSTER…).
type App struct {
	Cmd      string
	Argv     []string
	Env      []string
	Cwd      string
	MaxProcs int
	Info     []pmix.Info
}

// Spawn starts a new job of apps, one nspace whose ranks are numbered
// across them (MPMD), as PMIx_Spawn does: through the launcher of this
// process's job (`pmixbus run`), placed as it places jobs, its output
// shown with this job's. The new job's processes get PMIX_SPAWNED and
// PMIX_PARENT_ID (this process). Spawn returns the new nspace once every
// rank has started. Job-level directives in info apply to every app:
// PMIX_HOST, PMIX_HOSTFILE, PMIX_MAPBY, PMIX_WDIR, PMIX_TIMEOUT (seconds),
// and pmix.KeySpawnCluster, the cluster to run on (another than this
// one's: the job grows across clusters).
//
// Errors: pmix.ErrBadParam for no app or a bad directive;
// PMIX_ERR_OUT_OF_RESOURCE (launch.ErrPlacement) when the ranks do not
// fit; PMIX_ERR_JOB_FAILED_TO_LAUNCH for a program that cannot start;
// PMIX_ERR_UNREACH for an agent that does not answer; PMIX_ERR_NOT_SUPPORTED
// for a job no launcher started; PMIX_ERR_TIMEOUT; ErrClosed.
func (c *Client) Spawn(ctx context.Context, info []pmix.Info, apps []App) (string, error) {
	if len(apps) == 0 {
		return "", pmix.Errorf(pmix.ErrBadParam, "spawn of no app")
	}
	f := &proto.Frame{Type: proto.TypeSpawn, Info: info, Apps: make([]proto.App, len(apps))}
	for i, a := range apps {
		if a.MaxProcs <= 0 || int64(a.MaxProcs) > int64(^uint32(0)) {
			return "", pmix.Errorf(pmix.ErrBadParam, "app %d: maxprocs %d", i, a.MaxProcs)
		}
		if a.Cwd == "" {
			a.Cwd, _ = os.Getwd()
		}
		f.Apps[i] = proto.App{Cmd: a.Cmd, Argv: a.Argv, Env: a.Env, Cwd: a.Cwd, MaxProcs: uint32(a.MaxProcs), Info: a.Info}
	}
	r, err := c.request(ctx, f)
	if err != nil {
		return "", err
	}
	return r.Nspace, nil
}

// SpawnCB is the callback form of Spawn (PMIx_Spawn_nb).
func (c *Client) SpawnCB(info []pmix.Info, apps []App, cb func(nspace string, err error)) {
	c.async(func(ctx context.Context) { cb(c.Spawn(ctx, info, apps)) })
}
