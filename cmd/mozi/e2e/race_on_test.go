//go:build e2e && race

package e2e

// raceEnabled: the mozi under test is built with the race detector too.
const raceEnabled = true
