package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/homelock/homelock/clientapi"
)

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: homelock status [--node ADDR[,ADDR...]] [--json]\n\nPrints a node's epoch, the members and their protocol versions, and its stats\n(of the first node listed that can be reached).\n--json prints them as one JSON object (snake_case fields, units in the names).\nExit status: 0 printed, 2 usage error, 121 node unreachable (refused, no TLS\nhandshake, or no answer within --timeout), 1 any other failure.\n\n"+apiClientHelp+"\nFlags:\n")
		fs.PrintDefaults()
	}
	var api apiClientFlags
	api.register(fs)
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "homelock status: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	nodes, err := api.nodes()
	if err != nil {
		fmt.Fprintf(stderr, "homelock status: %v\n", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var resp *clientapi.StatusResponse
	for i, node := range nodes {
		api.node = node
		last := i == len(nodes)-1
		bound, limit := *timeout, "--timeout "+timeout.String()
		if !last {
			// As with homelock lock: a paused node gets connectBound.
			bound, limit = connectBound, connectBound.String()
		}
		nctx, cancelNode := context.WithTimeout(ctx, bound)
		var code int
		resp, code = askStatus(nctx, api, limit, stderr)
		cancelNode()
		if resp != nil {
			break
		}
		// As with homelock lock, a node that cannot be reached gives way
		// to the next, while --timeout lasts.
		if code != exitNoNode || last || ctx.Err() != nil {
			return code
		}
		fmt.Fprintf(stderr, "homelock status: trying %s\n", nodes[i+1])
	}
	if *asJSON {
		fmt.Fprintln(stdout, resp.GetJson())
		return 0
	}
	var r clientapi.Report
	if err := json.Unmarshal([]byte(resp.GetJson()), &r); err != nil {
		fmt.Fprintf(stderr, "homelock status: bad answer: %v\n", err)
		return 1
	}
	printReport(stdout, r)
	return 0
}

// askStatus asks api.node for its status, within limit (ctx's deadline,
// for the message); without an answer it says why on stderr and returns the
// exit status.
func askStatus(ctx context.Context, api apiClientFlags, limit string, stderr io.Writer) (*clientapi.StatusResponse, int) {
	conn, err := api.dial(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A paused node's kernel still accepts the connection; nothing
		// answers on it.
		fmt.Fprintf(stderr, "homelock status: node %s did not answer within %s: paused, cut off, or not a homelock node\n", api.node, limit)
		return nil, exitNoNode
	}
	if err != nil {
		fmt.Fprintf(stderr, "homelock status: %v\n", err)
		if errors.Is(err, errNoConnection) {
			return nil, exitNoNode
		}
		return nil, exitFailed
	}
	defer conn.Close()
	resp, err := clientapi.NewClientClient(conn).Status(ctx, &clientapi.StatusRequest{})
	if err != nil {
		fmt.Fprintf(stderr, "homelock status: %s: %s\n", api.node, describe(err, nil))
		// As for homelock lock: a script tells a node it cannot reach
		// from one that answered wrongly.
		if c := status.Code(err); c == codes.Unavailable || c == codes.DeadlineExceeded {
			return nil, exitNoNode
		}
		return nil, exitFailed
	}
	return resp, 0
}

func printReport(w io.Writer, r clientapi.Report) {
	s := r.Status
	avail := "yes"
	if !s.Available {
		avail = "no: " + s.Reason
	}
	fmt.Fprintf(w, "node %s (store %s, incarnation %d, protocol v%d)\nepoch %d, liveness %v, cluster locks available: %s\n",
		s.NodeID, s.StoreID, s.Incarnation, s.ProtocolVersion, s.Epoch, time.Duration(s.LiveForMS)*time.Millisecond, avail)
	if s.Phase != "" && s.Phase != "member" {
		fmt.Fprintf(w, "membership: %s\n", s.Phase)
	}
	if s.GossipEncryption != "" {
		fmt.Fprintf(w, "gossip encryption: %s\n", s.GossipEncryption)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTORE\tADDRESS\tVERSION\tLIVENESS\tHEARD\t")
	for _, m := range s.Members {
		id, heard := m.ID, "never"
		switch {
		case m.Self:
			id, heard = id+" (self)", "-"
		case m.HeardMSAgo >= 0:
			heard = (time.Duration(m.HeardMSAgo) * time.Millisecond).String() + " ago"
		}
		if m.Relayed {
			heard += ", relayed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t\n", id, m.StoreID, m.Addr, m.ProtocolVersion, m.Liveness, heard)
	}
	tw.Flush()
	st := r.Stats
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range []struct {
		k string
		v any
	}{
		{"held", st.HeldDelegations}, {"pending", st.PendingAcquires}, {"deferred", st.DeferredLockers},
		{"admissions", st.Admissions}, {"local fast path", st.LocalFastPath},
		{"grants", st.Grants}, {"recalls", st.Recalls}, {"expired holds", st.ExpiredHolds},
		{"handoffs", st.Handoffs}, {"handed over", st.HandedOver}, {"taken over", st.TakenOver}, {"fenced writes", st.FencedWrites}, {"clock jumps", st.ClockJumps},
		{"relayed messages", st.RelayedMessages}, {"forwarded messages", st.ForwardedMessages},
	} {
		fmt.Fprintf(tw, "%s\t%v\t\n", row.k, row.v)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "KIND\tSENT\tBYTES\tRECEIVED\tBYTES\t")
	kinds := make([]string, 0, len(st.ByKind))
	for k := range st.ByKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		v := st.ByKind[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", k, v.SentMessages, v.SentBytes, v.ReceivedMessages, v.ReceivedBytes)
	}
	tw.Flush()
}
