//go:build !tenure_debug

package coordinator

// debugChecks: without the tenure_debug tag, Step checks no invariant
// (CheckInvariants walks the whole group).
const debugChecks = false
