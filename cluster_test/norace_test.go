//go:build !race

package clustertest

// raceScale is 1 without the race detector (see race_test.go).
const raceScale = 1
