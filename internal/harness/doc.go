// Package harness is the measurement gate behind `homelock harness`: a local
// cluster of real nodes (gRPC on loopback, memberlist, Pebble in a temporary
// directory) embedding the replicated store of cluster_test, measured the way
// a store author deciding whether to adopt homelock would ask: how fast is a
// repeat lock, a first lock, a contended key, many keys; what does a lock cost
// on the wire; what does running homelock cost a store that does not use it;
// how long does recovery take; how much memory does an idle delegation hold.
//
// Every number in a Report was measured in that run; percentiles come from
// HdrHistogram. Targets are goals printed beside the values, never asserted
// in tests: these machines are shared and noisy.
package harness
