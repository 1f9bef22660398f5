package proctest

import (
	"regexp"
	"strings"
	"testing"
)

// What `tenure serve` logs (console format, info level) once it has bound
// a Kafka listener, and its HTTP status page.
var (
	servingRE     = regexp.MustCompile(`\tserving\t\{"listener": "([^"]+)", "protocol": "[^"]*", "listen": "([^"]+)"`)
	servingHTTPRE = regexp.MustCompile(`\tserving http\t\{"status": "http://([^/"]+)/"`)
	listenerRE    = regexp.MustCompile(`([A-Za-z0-9_]+)://\{addr\}`)
)

// defaultListener is the name `tenure serve --listen` gives its listener
// (server.DefaultListenerName; proctest must not import the server, whose
// tests use proctest).
const defaultListener = "PLAINTEXT"

// StartServe starts `tenure serve` (bin with args) with "{addr}" and
// "{http}" in args replaced by 127.0.0.1:0, so that the server binds ports
// of its own, and waits until it logs the addresses it bound (its
// `serving` lines, which need the default console log format at info
// level). Addr is the bound address of the listener given "{addr}" (the
// first, with --listeners), Listeners every listener's by name, and HTTP
// the status page's when "{http}" was given. Unlike Start's, no port is
// picked ahead: a port FreeAddr returns is free only until another process
// or an outgoing connection takes it, which on a busy machine can happen
// before the child binds it, and a dial then checks the wrong listener.
// The process is stopped (SIGTERM, then SIGKILL) when tb ends, and its
// output logged if tb failed.
func StartServe(tb testing.TB, name, bin string, args ...string) *Process {
	tb.Helper()
	want, first := serveListeners(args)
	if first == "" {
		tb.Fatalf("start %s: no {addr} in its arguments %q", name, args)
	}
	http := false
	full := make([]string, len(args))
	for i, a := range args {
		http = http || strings.Contains(a, "{http}")
		a = strings.ReplaceAll(a, "{addr}", "127.0.0.1:0")
		full[i] = strings.ReplaceAll(a, "{http}", "127.0.0.1:0")
	}
	p, err := spawn(name, bin, full)
	if err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	tb.Cleanup(func() {
		p.Stop()
		if tb.Failed() {
			tb.Logf("output of %s:\n%s", name, p.Output())
		}
	})
	if err := p.waitReady("did not log that it serves", func() bool {
		out := p.out.String()
		bound := map[string]string{}
		for _, m := range servingRE.FindAllStringSubmatch(out, -1) {
			bound[m[1]] = m[2]
		}
		for _, l := range want {
			if bound[l] == "" {
				return false
			}
		}
		if http {
			m := servingHTTPRE.FindStringSubmatch(out)
			if m == nil {
				return false
			}
			p.HTTP = m[1]
		}
		p.Listeners, p.Addr = bound, bound[first]
		return true
	}); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	return p
}

// serveListeners returns the names of the listeners `tenure serve` opens
// with args, and the name of the first whose address is "{addr}".
func serveListeners(args []string) (names []string, first string) {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, "--listeners=")
		if !ok && a == "--listeners" && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if !ok {
			continue
		}
		for _, l := range strings.Split(v, ",") {
			if n, _, ok := strings.Cut(l, "://"); ok {
				names = append(names, n)
			}
		}
		if m := listenerRE.FindStringSubmatch(v); m != nil {
			first = m[1]
		}
		return names, first
	}
	for i, a := range args {
		if a == "--listen={addr}" || a == "--listen" && i+1 < len(args) && args[i+1] == "{addr}" {
			return []string{defaultListener}, defaultListener
		}
	}
	return []string{defaultListener}, ""
}
