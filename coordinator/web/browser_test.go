package web_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tenure-dev/tenure/coordinator/server"
	"github.com/tenure-dev/tenure/coordinator/web"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write docs/status-page.png from TestBrowser")

// screenshotPath is where -update-screenshot writes, from this package's
// directory.
const screenshotPath = "../../docs/status-page.png"

// newBrowser starts a headless Chromium (Debian's package) for t, in a
// fresh profile with everything that would reach the network turned off,
// and returns its context. Without Chromium the test is skipped, or fails
// when TENURE_REQUIRE_TOOLS=1 (as in CI, which installs it).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("TENURE_REQUIRE_TOOLS") == "1" {
			t.Fatalf("chromium is not installed (apt-get install chromium), and TENURE_REQUIRE_TOOLS=1: %v", err)
		}
		t.Skipf("chromium is not installed (apt-get install chromium): %v", err)
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 800),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser; no timeout on it, which would
	// stop the browser with it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// pageState is what the group page shows, read from its DOM.
type pageState struct {
	Cells []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Owner     string `json:"owner"`
		Token     int64  `json:"token"`
	} `json:"cells"`
	Members   []string `json:"members"`
	Name      string   `json:"name"`
	Live      string   `json:"live"`
	Marker    string   `json:"marker"`
	Timeline  []int32  `json:"timeline"`
	LogStatus string   `json:"logStatus"`
	Problem   string   `json:"problem"`
	Pwned     bool     `json:"pwned"`
	Text      string   `json:"text"`
}

const readPage = `(() => ({
	cells: [...document.querySelectorAll("#grids li.cell")].map((c) => ({
		topic: c.dataset.topic, partition: Number(c.dataset.partition), owner: c.dataset.owner || "", token: Number(c.dataset.token),
	})),
	members: [...document.querySelectorAll("#members-table tbody tr")].map((r) => r.dataset.member),
	name: document.getElementById("group-name").textContent,
	live: document.body.dataset.live || "",
	marker: String(window.tenureTestMarker || ""),
	timeline: [...document.querySelectorAll("#timeline li.entry")].map((e) => Number(e.dataset.epoch)),
	logStatus: document.getElementById("timeline-status").textContent,
	problem: document.getElementById("group-problem").hidden ? "" : document.getElementById("group-problem").textContent,
	pwned: window.pwned !== undefined,
	text: document.body.innerText,
}))()`

func (s *pageState) owners() map[int32]string {
	out := make(map[int32]string)
	for _, c := range s.Cells {
		out[c.Partition] = c.Owner
	}
	return out
}

// consistent reports why the page shows some partition more than once,
// or owned by a member it does not list; "" if it does neither.
func (s *pageState) consistent() string {
	seen := make(map[string]bool)
	for _, c := range s.Cells {
		k := fmt.Sprintf("%s[%d]", c.Topic, c.Partition)
		if seen[k] {
			return k + " is shown twice"
		}
		seen[k] = true
		if c.Owner != "" && !slices.Contains(s.Members, c.Owner) {
			return fmt.Sprintf("%s is owned by %s, which is not among the members %q", k, c.Owner, s.Members)
		}
	}
	return ""
}

// watchPage reads the page every 20 ms until settled returns "" for it,
// checking on every read that it is consistent, and fails t after 15 s.
func watchPage(t *testing.T, ctx context.Context, what string, settled func(*pageState) string) *pageState {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	reads := 0
	for {
		st, err := chromedp.Run(ctx, chromedp.Evaluate[*pageState](readPage))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		reads++
		if why := st.consistent(); why != "" {
			t.Fatalf("%s: on read %d the page shows %s", what, reads, why)
		}
		if st.Pwned {
			t.Fatal("a name was run as HTML")
		}
		why := settled(st)
		if why == "" {
			t.Logf("%s after %d reads of the page", what, reads)
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s: %s\npage text:\n%s", what, why, st.Text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// balanced reports why the page does not show all partitions of work
// owned, evenly, by exactly the members want; "" if it does.
func balanced(want []string, partitions int) func(*pageState) string {
	return func(st *pageState) string {
		if got := slices.Sorted(slices.Values(st.Members)); !slices.Equal(got, want) {
			return fmt.Sprintf("members %q, want %q", got, want)
		}
		if len(st.Cells) != partitions {
			return fmt.Sprintf("%d partitions shown, want %d", len(st.Cells), partitions)
		}
		count := make(map[string]int)
		for _, c := range st.Cells {
			if c.Topic != "work" || c.Owner == "" || c.Token <= 0 {
				return fmt.Sprintf("partition %s[%d] owner %q token %d", c.Topic, c.Partition, c.Owner, c.Token)
			}
			count[c.Owner]++
		}
		lo, hi := partitions/len(want), (partitions+len(want)-1)/len(want)
		for m, n := range count {
			if n < lo || n > hi {
				return fmt.Sprintf("%s owns %d partitions, want %d to %d", m, n, lo, hi)
			}
		}
		return ""
	}
}

// TestBrowser opens the status page in a real Chromium while a KIP-848
// group of stock kgo consumers forms on a 16-partition topic, and checks
// from the DOM that it never shows a partition twice or owned by a
// non-member, that it settles on every partition owned exactly once, as
// the server says, and that when a member leaves the grid follows without
// a reload. It then opens a group whose names are HTML and checks that
// they are shown as text, the generation log's entries included. With -update-screenshot it writes docs/status-page.png.
func TestBrowser(t *testing.T) {
	const (
		group      = "workers"
		partitions = 16
		members    = 4
	)
	ctx := newBrowser(t)
	srv, addr := startTenure(t, partitions)
	createTopic(t, addr, "work", partitions)

	src := web.ServerSource{Server: srv}
	hs := startPage(t, web.New(src, web.Logger(testLogger(t)), web.SampleInterval(50*time.Millisecond)))

	// The page is open before the first member comes, so it sees the
	// whole rebalance.
	clients := make([]*kgo.Client, members)
	clients[0] = consumer(t, addr, group, "work", "worker-1")
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	ids := func(cls []*kgo.Client) []string {
		var out []string
		for _, cl := range cls {
			if id, _ := cl.GroupMetadata(); id != "" {
				out = append(out, id)
			}
		}
		slices.Sort(out)
		return out
	}
	waitIDs := func(cls []*kgo.Client) []string {
		deadline := time.Now().Add(10 * time.Second)
		for len(ids(cls)) < len(cls) {
			if time.Now().After(deadline) {
				t.Fatalf("members have no IDs after 10s: %q", ids(cls))
			}
			time.Sleep(10 * time.Millisecond)
		}
		return ids(cls)
	}
	waitIDs(clients[:1])
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/#/groups/"+url.PathEscape(group))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.tenureTestMarker = "no reload"`)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < members; i++ {
		clients[i] = consumer(t, addr, group, "work", fmt.Sprintf("worker-%d", i+1))
	}
	all := waitIDs(clients)
	st := watchPage(t, ctx, fmt.Sprintf("%d members own every partition", members), balanced(all, partitions))
	view, err := srv.GroupView(group)
	if err != nil {
		t.Fatal(err)
	}
	server := make(map[int32]string)
	for _, p := range view.Partitions {
		server[p.Partition] = p.Owner
	}
	if page := st.owners(); !maps.Equal(page, server) {
		t.Errorf("the page shows owners %v, the server %v", page, server)
	}
	if st.Live != "sse" {
		t.Errorf("the page follows the group by %q, want server-sent events", st.Live)
	}

	// One member leaves: its partitions go to the others, and the page
	// follows without a reload.
	left, _ := clients[0].GroupMetadata()
	clients[0].Close()
	clients[0] = nil
	rest := slices.DeleteFunc(slices.Clone(all), func(id string) bool { return id == left })
	st = watchPage(t, ctx, "the others own every partition after one left", func(st *pageState) string {
		if why := balanced(rest, partitions)(st); why != "" {
			return why
		}
		v, err := srv.GroupView(group)
		if err != nil {
			return err.Error()
		}
		if len(st.Timeline) == 0 || st.Timeline[0] != v.Epoch {
			return fmt.Sprintf("timeline epochs %v, the group is at %d", st.Timeline, v.Epoch)
		}
		return ""
	})
	if st.Marker != "no reload" {
		t.Errorf("the page was reloaded")
	}
	if !strings.Contains(st.Text, "member-left") || !strings.Contains(st.Text, "member-joined") {
		t.Errorf("the timeline lacks the joins and the leave:\n%s", st.Text)
	}
	if *updateScreenshot {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // a frame at the new size
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.FromSlash(screenshotPath), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", screenshotPath)
	}

	t.Run("names are text", func(t *testing.T) {
		testHostileNames(t, ctx, srv, addr)
	})
}

// testHostileNames opens a group whose name and member ID are HTML that
// would set window.pwned if run, with its generation log.
func testHostileNames(t *testing.T, ctx context.Context, srv *server.Server, addr string) {
	const (
		group  = `<img src=x onerror="window.pwned=1">`
		member = `"><script>window.pwned=2</script>`
	)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(`<b onmouseover="window.pwned=3">client</b>`), kgoLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	join(t, cl, group, member, "work")
	hs := startPage(t, web.New(web.ServerSource{Server: srv}))
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/#/")); err != nil {
		t.Fatal(err)
	}
	// The list, then the group by its link.
	watchPage(t, ctx, "the list shows the group", func(st *pageState) string {
		if !strings.Contains(st.Text, group) {
			return "not listed yet"
		}
		return ""
	})
	link := `[...document.querySelectorAll("#groups-table a")].find((a) => a.textContent === ` + jsString(group) + `).click()`
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](link)); err != nil {
		t.Fatal(err)
	}
	st := watchPage(t, ctx, "the group page shows the names as text", func(st *pageState) string {
		switch {
		case st.Name != group:
			return fmt.Sprintf("heading %q", st.Name)
		case len(st.Members) != 1 || st.Members[0] != member:
			return fmt.Sprintf("members %q", st.Members)
		case len(st.Cells) == 0 || st.Cells[0].Owner != member:
			return "grid not shown yet"
		case st.LogStatus != "" || len(st.Timeline) == 0:
			return fmt.Sprintf("log status %q, timeline %v", st.LogStatus, st.Timeline)
		}
		return ""
	})
	if !strings.Contains(st.Text, `<b onmouseover="window.pwned=3">client</b>`) {
		t.Errorf("the client ID is not shown as text:\n%s", st.Text)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	b.WriteByte('"')
	return b.String()
}
