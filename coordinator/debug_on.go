//go:build tenure_debug

package coordinator

// debugChecks: built with the tenure_debug tag, every Step ends with
// CheckInvariants.
const debugChecks = true
