package homelock_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/homelock/homelock"
)

// A store embeds one node per process and locks a row around each write.
func Example() {
	dir, _ := os.MkdirTemp("", "homelock-example")
	defer os.RemoveAll(dir)
	cfg := homelock.DefaultConfig()
	cfg.NodeID, cfg.ClusterID, cfg.DataDir = "db1", "orders-db", dir
	cfg.GRPCAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Bootstrap, cfg.InitialMembers = true, []string{"db1"} // a new one-node cluster
	ctx := context.Background()
	node, err := homelock.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close(ctx)

	h, err := node.Lock(ctx, "orders/42")
	if err != nil {
		log.Fatal(err) // ErrTimeout, ErrLockUnavailable, ...: retry later
	}
	defer h.Unlock()
	// ... stage the write, tagged with h.Token() (and h.Grant() for a fence.Guard) ...
	if h.Valid() == nil { // the lease still holds: commit
		fmt.Println("committed under a token of epoch", h.Token().Epoch)
	}
	// Output: committed under a token of epoch 1
}
