package coordinator

import "github.com/twmb/franz-go/pkg/kmsg"

// response returns the response a reply fills: r, the caller's
// (Request.Resp), if it is a PT, else a new one; either way reset to the
// zero value at version, with kmsg's defaults. Every reply of the core
// starts here (commitResponse aside, which also keeps r's topic slice), so
// a caller that reuses responses never sends a field left from an earlier
// use, and need not reset them itself.
func response[T any, PT interface {
	*T
	kmsg.Response
	Default()
}](r kmsg.Response, version int16) PT {
	resp, ok := r.(PT)
	if !ok || resp == nil {
		resp = new(T)
	} else {
		var zero T
		*resp = zero
	}
	resp.SetVersion(version)
	resp.Default()
	return resp
}
