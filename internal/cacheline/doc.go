// Package cacheline keeps per-shard state that different cores write out of
// each other's cache lines. Shards sit side by side, so their structs are
// padded with a Pad, and the small slices a shard's fast path writes start a
// whole line long (Slice): made as small as they start, several shards'
// slices would be packed into one line by the allocator, and two cores on
// distinct shards would take turns owning it.
package cacheline
