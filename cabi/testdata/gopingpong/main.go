package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
)

func main() {
	ctx := context.Background()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gopingpong pong|ping N, launched by an agent")
		os.Exit(2)
	}
	c, err := client.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer func() { _ = c.Finalize(ctx) }()
	if os.Args[1] == "pong" {
		_, err := c.RegisterEventHandler(ctx, []pmix.Status{-3100}, nil, func(_ *bus.Call, done bus.Done) {
			c.NotifyEventCB(-3101, pmix.RangeNamespace, nil, func(error) {})
			done(pmix.EventActionComplete, nil)
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("ready")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until standard input closes
		return
	}
	n := 100
	if len(os.Args) > 2 {
		n, _ = strconv.Atoi(os.Args[2])
	}
	answers := make(chan struct{}, n+1) // counted as pingpong.c counts them, never blocking a handler
	if _, err := c.RegisterEventHandler(ctx, []pmix.Status{-3101}, nil, func(_ *bus.Call, done bus.Done) {
		answers <- struct{}{}
		done(pmix.EventActionComplete, nil)
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	start := time.Now()
	for range n {
		if err := c.NotifyEvent(ctx, -3100, pmix.RangeNamespace, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		<-answers
	}
	fmt.Printf("rtt_ns %d\n", time.Since(start).Nanoseconds()/int64(n))
}
