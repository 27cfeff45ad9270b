package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
)

func main() {
	var (
		noPMIx   = flag.Bool("no-pmix", false, "never call Init (a plain program)")
		watch    = flag.Bool("watch", false, "register a default handler for every event and print each one")
		sleep    = flag.Duration("sleep", 0, "wait this long before ending")
		pause    = flag.Duration("pause", 0, "wait this long after Init, before anything else")
		failRank = flag.Int("fail-rank", -2, "the rank that fails (-1: every rank)")
		fail     = flag.String("fail", "", "how it fails: exit:N, signal, abort:N, nofinalize")
		say      = flag.String("say", "", "print this on stdout and stderr, prefixed by the rank")
		get      = flag.String("get", "", "comma list of keys to Get from the own job and print")
		fence    = flag.Bool("fence", false, "fence with every rank of the job once set up (registered with -watch), before failing")
		codes    = flag.String("codes", "", "with -watch: register for these comma-separated codes instead of every event")
		rdv      = flag.String("rendezvous", "", "mine,theirs: RFC0003's rendezvous and connect (rank 0 publishes the job's cluster:nspace as mine; every rank looks up theirs, then connects both jobs)")
		await    = flag.Int("await", 0, "with -watch: once set up, wait for an event of this code, then disconnect (after -rendezvous) and end (the failing rank does not wait)")
		help     = flag.String("help", "", "FILE/TOPIC: send a help message of that file and topic (client.ShowHelp)")
		wantTerm = flag.Bool("want-term", false, "with -watch: the handler returns PMIX_EVENT_WANT_TERMINATION (RFC0018)")
		spawnN   = flag.Int("spawn", 0, "rank 0 spawns a job of this many ranks (PMIx_Spawn) and prints its nspace or the error")
		spawnCmd = flag.String("spawn-cmd", "", "with -spawn: the program (default: this one)")
		spawnArg = flag.String("spawn-args", "-get pmix.parent,pmix.spawned", "with -spawn: its arguments, split at spaces")
		spawnIn  = flag.String("spawn-info", "", "with -spawn: job directives key=value,… (string values)")
		spawnRk  = flag.Int("spawn-rank", 0, "with -spawn: the rank that spawns")
		spawnMP  = flag.Int("spawn-apps", 1, "with -spawn: this many app contexts of -spawn ranks each (MPMD)")
		endOn    = flag.Int("end-on", 0, "with -watch: a rank that does not fail ends once it has seen an event of this code (waiting -sleep at most)")
		kill     = flag.Int("kill", -1, "after -fence, rank 0 ends this rank of the job with PMIx_Job_control (PMIX_JOB_CTRL_KILL) and prints what it returned")
	)
	flag.Parse()
	if *noPMIx {
		fmt.Println("plain program")
		time.Sleep(*sleep)
		return
	}
	ctx := context.Background()
	c, err := client.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		os.Exit(90)
	}
	me := c.Proc()
	time.Sleep(*pause)
	if *say != "" {
		fmt.Printf("%d: %s\n", me.Rank, *say)
		fmt.Fprintf(os.Stderr, "%d: %s\n", me.Rank, *say)
	}
	if file, topic, ok := strings.Cut(*help, "/"); ok {
		if err := c.ShowHelp(ctx, file, topic, fmt.Sprintf("testprog: help message %s of %s\n", topic, file)); err != nil {
			fmt.Fprintln(os.Stderr, "show help:", err)
			os.Exit(93)
		}
	}
	for _, k := range strings.Split(*get, ",") {
		if k == "" {
			continue
		}
		v, err := c.Get(ctx, pmix.Proc{Nspace: me.Nspace, Rank: me.Rank}, k, nil)
		fmt.Printf("%d: get %s = %v (type %d) err=%v\n", me.Rank, k, v, v.Type(), err)
	}
	if *spawnN > 0 && int(me.Rank) == *spawnRk {
		spawn(ctx, c, *spawnN, *spawnMP, *spawnCmd, *spawnArg, *spawnIn)
	}
	heard := make(chan struct{}, 1)
	ending := make(chan struct{}, 1)
	if *watch {
		var want []pmix.Status
		for _, f := range strings.Split(*codes, ",") {
			if n, err := strconv.Atoi(f); err == nil {
				want = append(want, pmix.Status(n))
			}
		}
		_, err := c.RegisterEventHandler(ctx, want, nil, func(call *bus.Call, done bus.Done) {
			affected, exit := "-", "-"
			if v, ok := pmix.LookupValue(call.Info, pmix.KeyEventAffectedProc); ok {
				if p, ok := v.Proc(); ok {
					affected = fmt.Sprintf("%s.%d", p.Nspace, p.Rank)
				} else {
					affected = "not-a-proc"
				}
			}
			if v, ok := pmix.LookupValue(call.Info, pmix.KeyExitCode); ok {
				exit = v.String()
			}
			fmt.Printf("%d: event %d affected=%s exit=%s\n", me.Rank, call.Code, affected, exit)
			for _, w := range []struct {
				code int
				ch   chan struct{}
			}{{*await, heard}, {*endOn, ending}} {
				if w.code != 0 && call.Code == pmix.Status(w.code) {
					select {
					case w.ch <- struct{}{}:
					default:
					}
				}
			}
			var results []pmix.Info
			if *wantTerm {
				results = []pmix.Info{pmix.NewInfo(pmix.KeyEventWantTermination, pmix.Bool(true))}
			}
			done(pmix.EventActionComplete, results)
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "register:", err)
			os.Exit(91)
		}
		fmt.Printf("%d: watching\n", me.Rank)
	}
	if *fence {
		if err := c.Fence(ctx, []pmix.Proc{{Nspace: me.Nspace, Rank: pmix.RankWildcard}}, nil); err != nil {
			fmt.Fprintln(os.Stderr, "fence:", err)
			os.Exit(92)
		}
	}
	if *kill >= 0 && me.Rank == 0 {
		_, err := c.JobControl(ctx, []pmix.Proc{{Rank: pmix.Rank(*kill)}}, []pmix.Info{pmix.NewInfo(pmix.KeyJobCtrlKill, pmix.Bool(true))})
		fmt.Printf("%d: killed %d err=%v\n", me.Rank, *kill, err)
	}
	group := ""
	if *rdv != "" {
		group = rendezvous(ctx, c, *rdv)
	}
	failing := *failRank == -1 || *failRank == int(me.Rank)
	if *await != 0 && !failing {
		<-heard
		if group != "" {
			if err := c.Disconnect(ctx, group, nil); err != nil {
				fmt.Fprintln(os.Stderr, "disconnect:", err)
				os.Exit(94)
			}
			fmt.Printf("%d: disconnected\n", me.Rank)
		}
	}
	if failing {
		how, arg, _ := strings.Cut(*fail, ":")
		n, _ := strconv.Atoi(arg)
		switch how {
		case "exit":
			_ = c.Finalize(ctx)
			os.Exit(n)
		case "signal":
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		case "abort":
			if err := c.Abort(ctx, pmix.Status(n), "testprog aborts", nil); err != nil {
				fmt.Fprintln(os.Stderr, "abort:", err)
			}
			time.Sleep(time.Minute) // the launch service ends it
		case "nofinalize":
			os.Exit(0)
		}
	}
	if *endOn != 0 {
		select {
		case <-ending:
		case <-time.After(*sleep):
		}
	} else {
		time.Sleep(*sleep)
	}
	_ = c.Finalize(ctx)
}

// rendezvous is RFC0003's example: rank 0 publishes the job's
// "cluster:nspace" (GLOBAL) under the first key of spec, every rank looks
// up the second and connects the two jobs (WILDCARD each). It prints
// "<rank>: connected <new nspace> rank <new rank>" and returns the new
// nspace; a failure ends the process.
func rendezvous(ctx context.Context, c *client.Client, spec string) string {
	me := c.Proc()
	mine, theirs, ok := strings.Cut(spec, ",")
	if !ok {
		fmt.Fprintln(os.Stderr, "-rendezvous: want mine,theirs")
		os.Exit(2)
	}
	myID := c.Cluster() + ":" + me.Nspace
	if me.Rank == 0 {
		err := c.Publish(ctx, []pmix.Info{pmix.NewInfo(mine, pmix.String(myID)), pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(pmix.RangeGlobal))})
		if err != nil {
			fmt.Fprintln(os.Stderr, "publish:", err)
			os.Exit(95)
		}
	}
	found, err := c.Lookup(ctx, []string{theirs}, []pmix.Info{pmix.NewInfo(pmix.KeyWait, pmix.Int32(0)), pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(60))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "lookup:", err)
		os.Exit(96)
	}
	remote, _ := found[0].Value.Str()
	procs := []pmix.Proc{{Nspace: myID, Rank: pmix.RankWildcard}, {Nspace: remote, Rank: pmix.RankWildcard}}
	ns, rank, err := c.Connect(ctx, procs, []pmix.Info{pmix.NewInfo(pmix.KeyConnectID, pmix.String("testprog")), pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(60))})
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		os.Exit(97)
	}
	fmt.Printf("%d: connected %s rank %d\n", me.Rank, ns, rank)
	// RFC0003: the connect gave every member the job-level info of the
	// other job.
	size, err := c.Get(ctx, pmix.Proc{Nspace: remote, Rank: pmix.RankWildcard}, pmix.KeyJobSize, nil)
	fmt.Printf("%d: get %s of %s = %v err=%v\n", me.Rank, pmix.KeyJobSize, remote, size, err)
	return ns
}

// spawn is PMIx_Spawn of apps app contexts of n ranks each of cmd (this
// program when empty) with args; it prints "<rank>: spawned <nspace>" or
// "<rank>: spawn failed: <status> <error>".
func spawn(ctx context.Context, c *client.Client, n, apps int, cmd, args, directives string) {
	me := c.Proc()
	if cmd == "" {
		cmd, _ = os.Executable()
	}
	var info []pmix.Info
	for _, kv := range strings.Split(directives, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			info = append(info, pmix.NewInfo(k, pmix.String(v)))
		}
	}
	var list []client.App
	for range apps {
		list = append(list, client.App{Cmd: cmd, Argv: append([]string{cmd}, strings.Fields(args)...), MaxProcs: n})
	}
	ns, err := c.Spawn(ctx, info, list)
	if err != nil {
		fmt.Printf("%d: spawn failed: %d %v\n", me.Rank, pmix.StatusOf(err), err)
		return
	}
	fmt.Printf("%d: spawned %s\n", me.Rank, ns)
}
