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
		failRank = flag.Int("fail-rank", -2, "the rank that fails (-1: every rank)")
		fail     = flag.String("fail", "", "how it fails: exit:N, signal, abort:N, nofinalize")
		say      = flag.String("say", "", "print this on stdout and stderr, prefixed by the rank")
		get      = flag.String("get", "", "comma list of keys to Get from the own job and print")
		fence    = flag.Bool("fence", false, "fence with every rank of the job once set up (registered with -watch), before failing")
		codes    = flag.String("codes", "", "with -watch: register for these comma-separated codes instead of every event")
		help     = flag.String("help", "", "FILE/TOPIC: send a help message of that file and topic (client.ShowHelp)")
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
			done(pmix.EventActionComplete, nil)
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
	if *failRank == -1 || *failRank == int(me.Rank) {
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
	time.Sleep(*sleep)
	_ = c.Finalize(ctx)
}
