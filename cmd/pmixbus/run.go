package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/dvm"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

func init() {
	register(&command{
		name:    "run",
		summary: "launch a job's processes through the agents (as prterun/srun)",
		run:     runRun,
	})
}

// runFlags are the flags of one app context.
type runFlags struct {
	fs            *flag.FlagSet
	n             *int
	hosts         *string
	hostfile      *string
	mapBy         *string
	cluster       *string
	nspace        *string
	wdir          *string
	oversubscribe *bool
	export        stringList
	env           stringList
}

func newRunFlags(name string) *runFlags {
	f := &runFlags{fs: newFlagSet(name, "[flags] prog [args…] [: [flags] prog [args…]]…", "")}
	f.fs.Usage = func() { printRunHelp(f.fs.Output(), f.fs, "") } // mpirun's layout (runhelp.go)
	f.n = f.fs.Int("n", 1, "run `N` processes of the program")
	f.hosts = f.fs.String("host", "", "`hosts` to run on: node[:slots],…, a node named again being one slot more (as mpirun's -H)")
	f.hostfile = f.fs.String("hostfile", "", "run on the hosts of `file`: a line per host, \"name [slots=N]\"; without slots=, as many as its agent offers; --host then picks among them")
	f.mapBy = f.fs.String("map-by", launch.MapBySlot, "mapping `policy`: slot fills each node's slots in turn (core, socket, numa, hwthread, board, package, l1cache…l3cache do the same: ranks are not bound), node goes round the nodes; :OVERSUBSCRIBE or :NOOVERSUBSCRIBE may follow")
	f.cluster = f.fs.String("cluster", "", "run on this `cluster` (default: the cluster of the server connected to)")
	f.nspace = f.fs.String("nspace", "", "the job's `nspace` (default: a unique one)")
	f.wdir = f.fs.String("wdir", "", "the ranks' working `dir` (default: the current one)")
	f.oversubscribe = f.fs.Bool("oversubscribe", false, "place more ranks than free slots")
	f.fs.Var(&f.export, "x", "export environment variable `VAR` to the ranks with its value here, or set VAR=value in theirs (repeatable)")
	f.fs.Var(&f.env, "env", "set `VAR=VAL` in the ranks' environment (repeatable)")
	addAliases(f.fs)
	return f
}

// spec turns an app context's flags and program into a job spec.
func (f *runFlags) spec() (launch.JobSpec, error) {
	args := f.fs.Args()
	if len(args) == 0 {
		return launch.JobSpec{}, errors.New("no program given")
	}
	if *f.n < 1 {
		return launch.JobSpec{}, fmt.Errorf("-n %d: want at least 1", *f.n)
	}
	policy, over, err := launch.ParseMapBy(*f.mapBy)
	if err != nil {
		return launch.JobSpec{}, fmt.Errorf("--%s", pmix.MessageOf(err))
	}
	s := launch.JobSpec{N: *f.n, MapBy: policy, Oversubscribe: *f.oversubscribe, Nspace: *f.nspace,
		App: launch.App{Path: args[0], Args: args[1:], Env: map[string]string{}}}
	if over != nil {
		s.Oversubscribe = *over
	}
	if *f.cluster != "" {
		id, err := cluster.ParseID(*f.cluster)
		if err != nil {
			return s, fmt.Errorf("--cluster: %v", err)
		}
		s.Cluster = id
	}
	if s.Hosts, err = f.placeHosts(); err != nil {
		return s, err
	}
	dir := *f.wdir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return s, fmt.Errorf("--wdir: %v", err)
		}
		s.App.Dir = abs
	}
	for _, v := range f.export {
		k, val, hasVal := strings.Cut(v, "=")
		if k == "" {
			return s, fmt.Errorf("-x %q: want VAR or VAR=value", v)
		}
		if !hasVal {
			var ok bool
			if val, ok = os.LookupEnv(k); !ok {
				return s, fmt.Errorf("-x %s: the variable is not set here; give its value as -x %s=value", k, k)
			}
		}
		s.App.Env[k] = val
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return s, fmt.Errorf("--env %q: want VAR=VAL", kv)
		}
		s.App.Env[k] = v
	}
	return s, nil
}

// placeHosts is the hosts --host and --hostfile name: the hostfile's,
// or those of --host, which must be among the hostfile's when both are
// given (as mpirun's -H picks among a hostfile's hosts).
func (f *runFlags) placeHosts() ([]launch.Node, error) {
	var fromFile []launch.Node
	if *f.hostfile != "" {
		file, err := os.Open(*f.hostfile)
		if err != nil {
			return nil, fmt.Errorf("--hostfile: %v", err)
		}
		defer file.Close()
		if fromFile, err = launch.ParseHostfile(file); err != nil {
			return nil, fmt.Errorf("--hostfile %s: %v", *f.hostfile, pmix.MessageOf(err))
		}
	}
	if *f.hosts == "" {
		return fromFile, nil
	}
	hosts, err := launch.ParseHosts(*f.hosts)
	if err != nil {
		return nil, err
	}
	for _, h := range hosts {
		if fromFile != nil && !slices.ContainsFunc(fromFile, func(n launch.Node) bool { return n.Name == h.Name }) {
			return nil, fmt.Errorf("--host %s is not in --hostfile %s", h.Name, *f.hostfile)
		}
	}
	return hosts, nil
}

// splitContexts splits the command line at ':' arguments.
func splitContexts(args []string) [][]string {
	var out [][]string
	cur := []string{}
	for _, a := range args {
		if a == ":" {
			out = append(out, cur)
			cur = []string{}
			continue
		}
		cur = append(cur, a)
	}
	return append(out, cur)
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	contexts := splitContexts(args)
	first := newRunFlags("run")
	var (
		natsURL     = localNATSFlag(first.fs, "linked to the clusters")
		nkey        = first.fs.String("nkey", defaultKeyFile(security.RoleLauncher), "sign in with the NATS key in `file`; the launcher role's key by default (docs/security.md)")
		timeout     = first.fs.Duration("timeout", 0, "end the job after this `duration` (exit status 124); 0: no limit")
		continuous  = first.fs.Bool("continuous", false, "keep the job running when a rank ends abnormally (events only)")
		output      = first.fs.String("output", "", "how to show the ranks' output, as prterun's --output: a comma list of tag, tag-detailed, tag-fullname, rank, timestamp, xml, merge-stderr-to-stdout, file=PATH, dir=DIR, raw, json, cluster (unique prefixes)")
		tagOutput   = first.fs.Bool("tag-output", false, "tag each line with [jobid,rank] (--output tag)")
		timestamps  = first.fs.Bool("timestamp-output", false, "timestamp each line (--output timestamp)")
		xmlOutput   = first.fs.Bool("xml", false, "show the output as one XML document (--output xml)")
		merge       = first.fs.Bool("merge-stderr-to-stdout", false, "send the ranks' stderr to stdout (--output merge-stderr-to-stdout)")
		outDir      = first.fs.String("output-filename", "", "write each rank's output to `dir`/<nspace>/rank.N/stdout and stderr (--output dir=DIR)")
		showVersion = first.fs.Bool("version", false, "print the version and exit")
		noteTerm    = first.fs.Bool("notify-termination", false, "raise PMIX_EVENT_PROC_TERMINATED for normal exits too")
		allHelp     = first.fs.Bool("no-aggregate-help", false, "show every help message the ranks send, not the first of each kind and a count of the rest")
		iofLimit    = first.fs.String("iof-limit", "10MiB", "the `size` of each output channel (stdout, stderr) of a job that is kept, across its ranks (PMIX_IOF_CACHE_SIZE; at most 1GiB)")
		iofDrop     = first.fs.String("iof-drop", "newest", "what goes when a channel reaches --iof-limit: `newest` (later output, with one warning) or oldest")
		stdinFlag   = first.fs.String("stdin", "0", "the `ranks` that read this stdin: a rank of the job, all or none")
	)
	first.fs.Bool("allow-run-as-root", false, "accepted for mpirun's command lines; pmixbus runs as any user")
	launchAgent := first.fs.String("launch-agent", "", "start an agent on each host of --hostfile/--host through this `command`, {host} standing for the host (default, when no NATS server is named or running here: "+dvm.DefaultLaunchAgent()+"); the agent of the first host embeds the NATS server unless --nats names one")
	addAliases(first.fs)
	first.fs.Usage = func() { printRunHelp(first.fs.Output(), first.fs, helpCategory(contexts[0])) }
	if code, done := parseFlags(first.fs, contexts[0], stdout, stderr); done {
		return code
	}
	if *showVersion {
		fmt.Fprintf(stdout, "pmixbus run (pmixbus) %s\n", pmixbusVersion())
		return exitOK
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pmixbus run: "+format+"\n", a...)
		return exitFail
	}
	natsNamed := *natsURL != "" || os.Getenv("PMIXBUS_NATS") != ""
	natsErr := applyLocalNATS(first.fs, natsURL, *first.cluster)
	dvmHosts, err := first.placeHosts()
	if err != nil {
		return usageError(first.fs, stderr, "%v", err)
	}
	if len(dvmHosts) == 0 && natsErr != nil {
		// No hosts named and no server here: inside a Slurm allocation,
		// its nodes, as prterun takes them.
		if dvmHosts, err = dvm.SlurmAllocation(ctx); err != nil {
			return fail("%v", pmix.MessageOf(err))
		}
	}
	// Agents are started on the hosts when asked to, or when there is no
	// server to run through: the DVM starts itself, as prterun's.
	startDVM := len(dvmHosts) > 0 && (*launchAgent != "" || natsErr != nil)
	if natsErr != nil && !startDVM {
		return usageError(first.fs, stderr, "%v", natsErr)
	}
	if startDVM && !natsNamed {
		*natsURL = "" // the first host's agent embeds it
	}
	opts, err := iof.ParseOutput(*output)
	if err != nil {
		return usageError(first.fs, stderr, "%v", pmix.MessageOf(err))
	}
	opts.Tag = opts.Tag || *tagOutput
	opts.Timestamp = opts.Timestamp || *timestamps
	opts.XML = opts.XML || *xmlOutput
	opts.Merge = opts.Merge || *merge
	if *outDir != "" {
		opts.Dir = *outDir
	}
	limit, err := iof.ParseSize(*iofLimit)
	if err != nil || limit < 1 || limit > iof.MaxLimit {
		return usageError(first.fs, stderr, "--iof-limit %s: want a size from 1 to 1GiB, such as 512KiB or 10MiB", *iofLimit)
	}
	if *iofDrop != "newest" && *iofDrop != "oldest" {
		return usageError(first.fs, stderr, "--iof-drop %s: want newest or oldest", *iofDrop)
	}
	var stdin launch.Stdin
	if rank, none, err := launch.ParseStdinTarget(*stdinFlag); err != nil {
		return usageError(first.fs, stderr, "%v", pmix.MessageOf(err))
	} else if !none {
		stdin = launch.Stdin{Reader: &foregroundStdin{f: os.Stdin}, Rank: rank}
	}
	var specs []launch.JobSpec
	for i, argv := range contexts {
		f := first
		if i > 0 {
			f = newRunFlags("run")
			if code, done := parseFlags(f.fs, argv, stdout, stderr); done {
				return code
			}
		}
		s, err := f.spec()
		if err != nil {
			return usageError(first.fs, stderr, "app context %d: %v", i+1, err)
		}
		specs = append(specs, s)
	}
	clusters := map[cluster.ID]bool{}
	for _, s := range specs {
		clusters[s.Cluster] = true
	}
	opts.Cluster = opts.Cluster || len(clusters) > 1 // ranks of two clusters would be ambiguous
	var run atomic.Pointer[launch.Run]
	display, err := iof.NewDisplay(iof.Config{Options: opts, Stdout: stdout, Stderr: stderr, JobSize: func(ns string) int {
		if r := run.Load(); r != nil {
			return r.JobSize(ns)
		}
		return 0
	}, Source: func(ns string, rank pmix.Rank) (string, int, bool) {
		if r := run.Load(); r != nil {
			return r.Source(ns, rank)
		}
		return "", 0, false
	}})
	if err != nil {
		return usageError(first.fs, stderr, "%v", pmix.MessageOf(err))
	}
	defer func() {
		if err := display.Close(); err != nil {
			fmt.Fprintf(stderr, "pmixbus run: output: %v\n", err)
		}
	}()
	if startDVM && *natsURL == "" {
		if err := ensureAgentKeys(); err != nil {
			return fail("%v", err)
		}
	}
	key, identity, err := toolKey(*nkey, given(first.fs, "nkey"))
	if err != nil {
		return usageError(first.fs, stderr, "%v", err)
	}
	if startDVM {
		c := cluster.ID(*first.cluster)
		if c == "" {
			c = "dvm"
		}
		d, stop, err := startAgents(ctx, dvmHosts, c, *natsURL, *launchAgent, key, given(first.fs, "nkey"), "run", stderr)
		if err != nil {
			return fail("starting the agents: %v", pmix.MessageOf(err))
		}
		defer stop()
		*natsURL = d.URL()
	}
	agents := localAgentsAt(*natsURL) // to tell the loss of "its" agent from that of NATS
	// The job is named here: the launcher signs in for it alone, with a
	// job key of its own that the launcher key vouches for
	// (docs/security.md, "Credentials per job").
	nspace := launch.NameJob(specs)
	var (
		childMu  sync.Mutex
		children []*nats.Conn
	)
	defer func() {
		childMu.Lock()
		defer childMu.Unlock()
		for _, c := range children {
			c.Close()
		}
	}()
	connectJob := func(nspace string) (*nats.Conn, error) {
		jobKey, err := jobCredential(key, *nkey, nspace)
		if err != nil {
			return nil, err
		}
		// Pings every second: a server cut off silently is noticed within
		// two (lostAfter's margin), not nats.go's default of minutes.
		return connectTool(*natsURL, jobKey, given(first.fs, "nkey"), stderr, "run",
			nats.Name("pmixbus run "+nspace), nats.Timeout(5*time.Second), nats.MaxReconnects(-1),
			nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2),
			nats.CustomInboxPrefix(security.LauncherInboxPrefix), asyncErrors(stderr, "run"))
	}
	nc, err := connectJob(nspace)
	if errors.Is(err, nats.ErrAuthorization) && key != nil {
		return fail("%s may not launch jobs: the server refused the job credential it vouched for (%v); sign in with the launcher key, --nkey %s, and name no job that another launcher runs (--nspace %s) (docs/security.md)", identity, err, defaultKeyFile(security.RoleLauncher), nspace)
	}
	if err != nil {
		return fail("connecting to %s: %v%s (give the URL of a pmixbus NATS server with --nats or PMIXBUS_NATS)", *natsURL, err, authHint(err, identity))
	}
	defer nc.Close()
	if err := mayLaunch(nc); err != nil {
		return fail("%s may not launch jobs: the server refused it (%v); sign in with the launcher key, --nkey %s (docs/security.md)", identity, err, defaultKeyFile(security.RoleLauncher))
	}

	r, err := launch.Launch(ctx, launch.Config{Conn: nc, Jobs: specs, Continuous: *continuous, NotifyTermination: *noteTerm,
		SignIn: func(ns string) (*nats.Conn, error) {
			if ns == nspace {
				return nc, nil
			}
			c, err := connectJob(ns)
			if err == nil {
				childMu.Lock()
				children = append(children, c)
				childMu.Unlock()
			}
			return c, err
		},
		Display: display, Stdout: stdout, Stderr: stderr, Started: func(r *launch.Run) { run.Store(r) }, Stdin: stdin,
		NodeDown: func(c cluster.ID, node string) {
			fmt.Fprintf(stderr, "pmixbus run: node %s of cluster %s is down: its agent has not answered for %v and its liveness key expired; its ranks count as ended\n", node, c, launch.DefaultJobTTL)
		},
		Help:   iof.NewAggregator(iof.HelpConfig{Out: stderr, All: *allHelp}),
		Output: launch.OutputSpec{Raw: opts.Raw, Limit: limit, DropOldest: *iofDrop == "oldest"}})
	if err != nil {
		if errors.Is(err, pmix.ErrNoPermissions) {
			return fail("%v (signed in with %s)", err, identity)
		}
		return fail("%v", err)
	}
	return waitRun(ctx, r, jobWatch{nc: nc, agents: agents, timeout: *timeout, continuous: *continuous}, stderr)
}

// mayLaunch checks that nc's sign-in may do what a launcher does first:
// receive replies on the launcher's inbox and call JetStream. A key
// without those rights (the watch key, say) would otherwise only make
// every request time out.
func mayLaunch(nc *nats.Conn) error {
	sub, err := nc.SubscribeSync(nc.NewInbox())
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := nc.Publish("$JS.API.INFO", nil); err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	return refused(nc)
}

// jobCredential returns the option that signs the launcher in for job
// nspace: a job credential vouched for by the key in file, or nil when
// there is no key (key nil: a server without authentication).
func jobCredential(key nats.Option, file, nspace string) (nats.Option, error) {
	if key == nil {
		return nil, nil
	}
	cred, err := security.FileJobCredential(file, nspace)
	if err != nil {
		return nil, fmt.Errorf("--nkey: %w", err)
	}
	return cred.Option(), nil
}
