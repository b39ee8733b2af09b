// Package harness is the measurement gate behind `homelock harness`: a local
// cluster of real nodes (gRPC on loopback, memberlist, Pebble in a temporary
// directory) embedding the replicated store of cluster_test, measured the way
// a store author deciding whether to adopt homelock would ask: how fast is a
// repeat lock, a first lock, a contended key, many keys; what does a lock cost
// on the wire; what does running homelock cost a store that does not use it;
// how long does recovery take; how much memory does an idle delegation hold.
//
// A run is a list of phases (phaseList), each declaring the measures it
// records and their targets. The throughput and latency phases run Options.
// Repeat times, in interleaved rounds, and a measure's verdict is its median
// over them; the report also gives the spread. A first lock is judged
// against a plain gRPC unary round trip measured beside it in the same run.
//
// Every number in a Report was measured in that run; percentiles come from
// HdrHistogram. Targets are goals printed beside the values, never asserted
// in tests: these machines are shared and noisy.
//
// A run fits a laptop: its memory and tmpfs use stay under 1 GB, each
// phase's data goes when the phase ends, a cancelled run closes its cluster
// and removes its directory, and a run killed outright leaves a directory
// that the next run recognises (by its free lock file) and removes.
//
// The same cluster runs the soak behind `homelock soak` (soak.go): workers
// contending for a few keys for minutes while one node at a time is killed
// or cleanly restarted, checked through the public API alone (two valid
// handles at once, tokens, the example store's counters, its Guards, and
// how soon every node locks every home's keys after each restart).
package harness
