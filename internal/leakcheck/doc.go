// Package leakcheck is goleak for code that runs memberlist: it checks that
// Close left no goroutine behind, except memberlist's own tail, which it
// waits for instead.
//
// memberlist's Shutdown stops its loops but does not wait for the work they
// have in flight. A probe that started just before Shutdown still waits for
// its ack timer and its TCP fallback, up to the probe interval scaled by
// awareness (at most 8x); a push/pull or an incoming stream runs to its TCP
// timeout. Those goroutines end by themselves, hold nothing of ours, and
// can send at most the message they were sending. goleak, called straight
// after Close, would report them as leaks, now and then, depending on what
// was in flight.
//
// Find therefore checks in two steps: every goroutine outside memberlist's
// in-flight functions must be gone at once (as goleak.Find checks it), and
// those inside them must be gone within TailBound. A goroutine of ours that
// stays, or a memberlist goroutine that never ends, still fails.
package leakcheck
