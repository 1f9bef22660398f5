//go:build unix

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// fabric is the network between the processes of a run: a toxiproxy proxy
// on every directed link from a client process to a server process, so
// that a fault can slow, cut or reset one process's view of another while
// the rest of the network stays whole. Links are named "from>to" after the
// processes' names; "peers>e1" carries the raft traffic of the other etcd
// members to e1.
type fabric struct {
	srv *toxiproxy.ApiServer

	mu    sync.Mutex
	links map[string]*link
}

// link is one proxy of the fabric.
type link struct {
	from, to string
	proxy    *toxiproxy.Proxy
}

func newFabric() *fabric {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	return &fabric{srv: srv, links: map[string]*link{}}
}

// add starts the proxy of the link from>to, which forwards to upstream, and
// returns the loopback address the client must dial instead of upstream.
func (f *fabric) add(from, to, upstream string) (string, error) {
	name := from + ">" + to
	p := toxiproxy.NewProxy(f.srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		return "", fmt.Errorf("chaos: proxy %s: %w", name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[name]; ok {
		p.Stop()
		return "", fmt.Errorf("chaos: two proxies for %s", name)
	}
	f.links[name] = &link{from: from, to: to, proxy: p}
	return p.Listen, nil
}

// toxic is one toxiproxy toxic, as its HTTP API takes it.
type toxic struct {
	Type       string         `json:"type"`
	Stream     string         `json:"stream"` // "upstream": from the client; "downstream": to it
	Toxicity   float32        `json:"toxicity"`
	Attributes map[string]int `json:"attributes"`
}

// inject adds the toxics to every link match accepts, under the name tag
// (each toxic gets tag plus its index, so one fault can add several), and
// returns the names of the links it touched.
func (f *fabric) inject(tag string, match func(from, to string) bool, toxics ...toxic) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var touched []string
	for name, l := range f.links {
		if !match(l.from, l.to) {
			continue
		}
		for i, t := range toxics {
			if t.Toxicity == 0 {
				t.Toxicity = 1
			}
			body, err := json.Marshal(struct {
				Name string `json:"name"`
				toxic
			}{fmt.Sprintf("%s.%d", tag, i), t})
			if err != nil {
				return touched, err
			}
			if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
				return touched, fmt.Errorf("chaos: toxic %s on %s: %w", t.Type, name, err)
			}
		}
		touched = append(touched, name)
	}
	slices.Sort(touched)
	return touched, nil
}

// heal removes every toxic the fault tag added.
func (f *fabric) heal(tag string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.links {
		for i := 0; ; i++ {
			if l.proxy.Toxics.RemoveToxic(context.Background(), fmt.Sprintf("%s.%d", tag, i)) != nil {
				break
			}
		}
	}
}

// healAll removes every toxic from every link.
func (f *fabric) healAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.links {
		l.proxy.Toxics.ResetToxics(context.Background())
	}
}

// stop stops the proxies of the links match accepts, for good: their
// connections close and their ports refuse.
func (f *fabric) stop(match func(from, to string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.links {
		if match(l.from, l.to) {
			l.proxy.Stop()
		}
	}
}

// close stops every proxy, closing the connections through them.
func (f *fabric) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.links {
		l.proxy.Stop()
	}
}
