package clientapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/homelock/homelock"
)

// Server serves the client API over one node.
type Server struct {
	UnimplementedClientServer
	node *homelock.Node
	// stopping ends when Stop is called: the node is shutting down.
	stopping context.Context
	stop     context.CancelFunc

	mu sync.Mutex
	// drains are the drain times the holders' clients asked for, by stream.
	drains map[uint64]time.Duration
	nextID uint64
}

// NewServer returns a Server over n; register it with RegisterClientServer.
func NewServer(n *homelock.Node) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{node: n, stopping: ctx, stop: cancel, drains: make(map[uint64]time.Duration)}
}

// DrainWait is the longest time a client holding a lock through this
// server asked for, to end its stream once told to stop
// (LockRequest.drain_nanos; `homelock lock` asks for its --kill-after and
// a second more); 0 when none holds or none asked.
func (s *Server) DrainWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, v := range s.drains {
		d = max(d, v)
	}
	return d
}

// holding records a holder's drain time until the returned func is called.
func (s *Server) holding(d time.Duration) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := s.nextID
	s.drains[id] = d
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.drains, id)
	}
}

// Stop tells every Lock stream that the node is shutting down. A locker
// still waiting fails at once (ErrClosed). A holder is told its lock is
// ending (LOST) but keeps it until its client ends the stream, which
// `homelock lock` does once its command has exited: the next holder never
// starts while that command still runs. The caller then waits for the
// streams to end (grpc.Server.GracefulStop), with a bound of its own.
func (s *Server) Stop() { s.stop() }

// stoppingDetail is the LOST event's detail when the node shuts down.
const stoppingDetail = "the node is shutting down: stop COMMAND; the lock is held until it exits"

// Lock implements ClientServer.
func (s *Server) Lock(stream Client_LockServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	var opts []homelock.LockOption
	if req.GetLeaseNanos() > 0 {
		opts = append(opts, homelock.WithLease(time.Duration(req.GetLeaseNanos())))
	}
	if req.GetWaitNanos() > 0 {
		opts = append(opts, homelock.WithWait(time.Duration(req.GetWaitNanos())))
	}
	if req.GetHomeSilenceNanos() > 0 {
		opts = append(opts, homelock.WithHomeSilence(time.Duration(req.GetHomeSilenceNanos())))
	}
	if req.GetNodeScope() {
		opts = append(opts, homelock.WithScope(homelock.ScopeNode))
	}
	ctx := stream.Context()
	lock := s.node.Lock
	if req.GetTry() {
		lock = s.node.TryLock
	}
	lockCtx, cancelLock := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.stopping, cancelLock)
	h, err := lock(lockCtx, req.GetKey(), opts...)
	unhook()
	cancelLock()
	if err != nil {
		if s.stopping.Err() != nil && errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: key %q: the node is shutting down", homelock.ErrClosed, req.GetKey())
		}
		return ToStatus(err)
	}
	defer h.Unlock()
	defer s.holding(time.Duration(max(req.GetDrainNanos(), 0)))()
	acquired := &LockEvent{Kind: LockEvent_KIND_ACQUIRED, Token: h.Token().String(), Grant: h.Grant(),
		ValidForNanos: int64(h.Remaining())}
	if err := stream.Send(acquired); err != nil {
		return err
	}
	// The client ends the critical section by closing its side; until then
	// it pings for the lease's remaining time. Sends stay on this goroutine
	// (a stream allows one sender).
	pings := make(chan uint64, 1)
	closed := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				closed <- err
				return
			}
			if p := m.GetPing(); p != 0 {
				select {
				case pings <- p:
				case <-ctx.Done():
				}
			}
		}
	}()
	stopping, told := s.stopping.Done(), false
	for {
		select {
		case <-h.Done():
			detail := "lease lost"
			if err := h.Valid(); err != nil {
				detail = err.Error()
			}
			_ = stream.Send(&LockEvent{Kind: LockEvent_KIND_LOST, Token: h.Token().String(), Detail: detail})
			return nil
		case <-stopping:
			// The node is shutting down. The lock stays held until the
			// client ends the stream, after its command exited.
			stopping, told = nil, true
			if err := stream.Send(&LockEvent{Kind: LockEvent_KIND_LOST, Token: h.Token().String(), Detail: stoppingDetail}); err != nil {
				return err
			}
			continue
		case p := <-pings:
			if told {
				continue // the client reads nothing after LOST
			}
			if err := stream.Send(&LockEvent{Kind: LockEvent_KIND_VALID, Token: h.Token().String(), Ping: p,
				ValidForNanos: int64(h.Remaining())}); err != nil {
				return err
			}
			continue
		case err := <-closed:
			if !errors.Is(err, io.EOF) {
				return err // cancelled: the deferred Unlock releases
			}
		}
		break
	}
	if err := h.Unlock(); err != nil {
		return stream.Send(&LockEvent{Kind: LockEvent_KIND_LOST, Token: h.Token().String(), Detail: err.Error()})
	}
	return stream.Send(&LockEvent{Kind: LockEvent_KIND_RELEASED, Token: h.Token().String()})
}

// Status implements ClientServer.
func (s *Server) Status(ctx context.Context, _ *StatusRequest) (*StatusResponse, error) {
	b, err := json.Marshal(NewReport(s.node.Status(), s.node.Stats()))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &StatusResponse{Json: string(b)}, nil
}

// ToStatus maps homelock's errors to gRPC codes: ErrTimeout is
// DeadlineExceeded, the retryable refusals (ErrLockUnavailable,
// ErrHookFailed, a closing node's ErrClosed) are FailedPrecondition,
// ErrTooManyDelegations is ResourceExhausted, ErrInvalidOption is
// InvalidArgument. Unavailable is left to gRPC itself, so that a client can
// tell a node it could not reach from one that answered "not now".
func ToStatus(err error) error {
	code := codes.Unknown
	switch {
	case errors.Is(err, homelock.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, homelock.ErrTooManyDelegations):
		code = codes.ResourceExhausted
	case errors.Is(err, homelock.ErrInvalidOption):
		code = codes.InvalidArgument
	case errors.Is(err, homelock.ErrLockUnavailable), errors.Is(err, homelock.ErrClosed), errors.Is(err, homelock.ErrHookFailed):
		code = codes.FailedPrecondition
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, err.Error())
}
