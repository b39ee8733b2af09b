// Package loopback hands out loopback addresses for listeners whose address
// others must know before they start: a gossip address that joining nodes
// dial, chosen before the node that binds it opens. Tests and the harness
// start such nodes by the dozen.
//
// Asking the kernel for a free port (listening on ":0" and closing again)
// leaves a window before the real bind in which any outgoing connection on
// the machine may be given that port as its own ephemeral one; with several
// test packages running at once, that happened. Addr chooses ports below
// Linux's ephemeral range (32768–60999 by default), which the kernel never
// hands out by itself, checks that TCP and UDP (memberlist binds both) are
// free there, and walks the range from a per-process offset so that two
// processes rarely try the same port.
package loopback
