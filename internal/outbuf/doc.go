// Package outbuf keeps a pure machine's output array from one step to the
// next.
//
// Each of epoch, home, delegation and internal/core returns what a step asks
// for as slices that its only driver copies out at once. Allocating those
// slices afresh in every step that sends was the largest source of garbage
// in the simulator and on the lock path, so each machine documents its
// output as good until its next call and hands the array back to itself with
// Keep. Keep clears what an earlier step returned beyond what the caller now
// reads, so nothing stays reachable longer than one step, and drops an array
// grown past MaxKept (an epoch change or a reclaim can send thousands of
// messages in one step) rather than hold it for good.
package outbuf
