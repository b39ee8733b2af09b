package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/homelock/homelock/clientapi"
)

func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: homelock status [--node ADDR] [--json]\n\nPrints a node's epoch, the members and their protocol versions, and its stats.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	node := fs.String("node", defaultAPIAddr, "client API address of a homelock node")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	conn, err := grpc.NewClient(*node, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(stderr, "homelock status: %v\n", err)
		return 1
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	resp, err := clientapi.NewClientClient(conn).Status(ctx, &clientapi.StatusRequest{})
	if err != nil {
		fmt.Fprintf(stderr, "homelock status: %s: %v\n", *node, err)
		return 1
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

func printReport(w io.Writer, r clientapi.Report) {
	s := r.Status
	avail := "yes"
	if !s.Available {
		avail = "no: " + s.Reason
	}
	fmt.Fprintf(w, "node %s (store %x, incarnation %d, protocol v%d)\nepoch %d, liveness %v, cluster locks available: %s\n",
		s.NodeID, s.StoreID, s.Incarnation, s.ProtocolVersion, s.Epoch, s.LiveFor.Round(time.Millisecond), avail)
	if s.Phase != "" && s.Phase != "member" {
		fmt.Fprintf(w, "membership: %s\n", s.Phase)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTORE\tADDRESS\tVERSION\tLIVENESS\t")
	for _, m := range s.Members {
		id := m.ID
		if m.Self {
			id += " (self)"
		}
		fmt.Fprintf(tw, "%s\t%x\t%s\t%d\t%s\t\n", id, m.StoreID, m.Addr, m.Version, m.Liveness)
	}
	tw.Flush()
	st := r.Stats
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range []struct {
		k string
		v any
	}{
		{"held", st.Held}, {"pending", st.Pending}, {"deferred", st.Deferred},
		{"admissions", st.Admissions}, {"local fast path", st.LocalFast},
		{"grants", st.Grants}, {"recalls", st.Recalls}, {"expired holds", st.ExpiredHolds},
		{"handoffs", st.Handoffs}, {"fenced writes", st.FencedWrites}, {"clock jumps", st.ClockJumps},
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
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", k, v.Sent.Msgs, v.Sent.Bytes, v.Received.Msgs, v.Received.Bytes)
	}
	tw.Flush()
}
