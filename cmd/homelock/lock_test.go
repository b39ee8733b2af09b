package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/homelock/homelock"
	"github.com/homelock/homelock/clientapi"
)

// fakeNode is a client API server that grants every lock with a fixed token
// and, if loseAfter is set, reports the lease lost after that long.
type fakeNode struct {
	clientapi.UnimplementedClientServer
	loseAfter time.Duration
	released  chan string
}

func (f *fakeNode) Lock(s clientapi.Client_LockServer) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	if err := s.Send(&clientapi.LockEvent{Kind: clientapi.LockEvent_KIND_ACQUIRED, Token: "e1.i2.c3"}); err != nil {
		return err
	}
	closed := make(chan error, 1)
	go func() { _, err := s.Recv(); closed <- err }()
	var lose <-chan time.Time
	if f.loseAfter > 0 {
		lose = time.After(f.loseAfter)
	}
	select {
	case <-closed:
		f.released <- req.GetKey()
		return s.Send(&clientapi.LockEvent{Kind: clientapi.LockEvent_KIND_RELEASED})
	case <-lose:
		return s.Send(&clientapi.LockEvent{Kind: clientapi.LockEvent_KIND_LOST, Detail: "lease ran out"})
	}
}

func (f *fakeNode) Status(context.Context, *clientapi.StatusRequest) (*clientapi.StatusResponse, error) {
	b, _ := json.Marshal(clientapi.Report{Status: homelock.Status{NodeID: "n1", Epoch: 4, Available: true,
		Members: []homelock.MemberStatus{{ID: "n1", Version: 1, Liveness: "alive", Self: true}}}})
	return &clientapi.StatusResponse{Json: string(b)}, nil
}

func serveFake(t *testing.T, f *fakeNode) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	clientapi.RegisterClientServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// The command sees the token and key in its environment, the lock command
// exits with its status, and the lock is released when it exits.
func TestLockPassesTokenAndExitStatus(t *testing.T) {
	f := &fakeNode{released: make(chan string, 1)}
	addr := serveFake(t, f)
	var out, errOut bytes.Buffer
	code := run([]string{"lock", "jobs/nightly", "--node", addr, "--", "sh", "-c", `echo "$HOMELOCK_KEY $HOMELOCK_TOKEN"; exit 7`}, &out, &errOut)
	require.Equal(t, 7, code, errOut.String())
	require.Equal(t, "jobs/nightly e1.i2.c3\n", out.String())
	select {
	case k := <-f.released:
		require.Equal(t, "jobs/nightly", k)
	case <-time.After(5 * time.Second):
		t.Fatal("lock not released after the command exited")
	}

	out.Reset()
	require.Equal(t, 0, run([]string{"lock", "k", "--node", addr, "--", "true"}, &out, &errOut))
}

// A lost lease stops the command: SIGTERM first, and the status says so.
func TestLockStopsCommandWhenLeaseLost(t *testing.T) {
	addr := serveFake(t, &fakeNode{loseAfter: 200 * time.Millisecond, released: make(chan string, 1)})
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run([]string{"lock", "k", "--node", addr, "--kill-after", "1s", "--", "sleep", "30"}, &out, &errOut)
	require.Equal(t, 128+15, code, errOut.String()) // killed by SIGTERM
	require.Less(t, time.Since(start), 10*time.Second)
	require.Contains(t, errOut.String(), "lock lost")

	// A command that ignores SIGTERM gets SIGKILL after --kill-after.
	errOut.Reset()
	code = run([]string{"lock", "k", "--node", addr, "--kill-after", "300ms", "--", "sh", "-c", `trap "" TERM; sleep 30`}, &out, &errOut)
	require.Equal(t, 128+9, code, errOut.String())
}

func TestLockUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, 2, run([]string{"lock"}, &out, &errOut))
	require.Equal(t, 2, run([]string{"lock", "k"}, &out, &errOut), "no command")
	require.Equal(t, 1, run([]string{"lock", "k", "--node", "127.0.0.1:1", "--", "true"}, &out, &errOut), "no node")
}

func TestStatusTableAndJSON(t *testing.T) {
	addr := serveFake(t, &fakeNode{})
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"status", "--node", addr}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "epoch 4")
	require.Contains(t, out.String(), "n1 (self)")
	out.Reset()
	require.Equal(t, 0, run([]string{"status", "--node", addr, "--json"}, &out, &errOut))
	var r clientapi.Report
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out.String())), &r))
	require.Equal(t, uint64(4), r.Status.Epoch)
}
