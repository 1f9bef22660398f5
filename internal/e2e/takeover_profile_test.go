package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	benchProfile      = flag.String("e2e.profile", "", "BenchmarkTakeover: a `dir` to write, from the kill until every group is served again, consecutive CPU profiles of each surviving node (the nodes get --enable-pprof) and of the load generator (this process): node<i>-<ms after the kill>.pprof, fleet-<ms>.pprof, and the survivors' logs, node<i>.log")
	benchProfileSlice = flag.Duration("e2e.profile-slice", time.Second, "BenchmarkTakeover: length of each profile of -e2e.profile")
)

// profileArgs are the serve flags -e2e.profile needs.
func profileArgs() []string {
	if *benchProfile == "" {
		return nil
	}
	return []string{"--enable-pprof"}
}

// profileTakeover writes, from now until the returned function is called
// (which waits for the slices under way), back-to-back CPU profiles of
// -e2e.profile-slice each of the nodes of h but the victim and of this
// process into tb's directory under -e2e.profile, named by the slice's
// start after killed. A takeover's cost is in a window of seconds that a
// whole run's profile drowns; slices show which second costs what. The
// survivors' allocation profiles at the start and at the end, and how
// many GC cycles they ran in between, show what the window allocated:
// GC took a third of the winner's CPU in one profile.
func profileTakeover(tb testing.TB, h *haSet, victim int, killed time.Time) (stop func()) {
	if *benchProfile == "" {
		return func() {}
	}
	dir := filepath.Join(*benchProfile, strings.ReplaceAll(tb.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	gcs := map[int]float64{}
	for i := range h.nodes {
		if i == victim || h.http == nil {
			continue
		}
		if err := fetchProfile(fmt.Sprintf("http://%s/debug/pprof/allocs", h.http[i]), filepath.Join(dir, fmt.Sprintf("node%d-allocs-kill.pprof", i)), 0); err != nil {
			tb.Logf("allocations of node %d: %v", i, err)
		}
		if v, err := h.metric(ctx, i, "go_gc_duration_seconds_count"); err == nil {
			gcs[i] = v
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	slice := *benchProfileSlice
	name := func(who string) string {
		return filepath.Join(dir, fmt.Sprintf("%s-%05d.pprof", who, time.Since(killed).Milliseconds()))
	}
	for i := range h.nodes {
		if i == victim || h.http == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%g", h.http[i], slice.Seconds())
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := fetchProfile(url, name(fmt.Sprintf("node%d", i)), slice); err != nil {
					tb.Logf("profile of node %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			f, err := os.Create(name("fleet"))
			if err != nil {
				tb.Logf("profile of the load generator: %v", err)
				return
			}
			if err := pprof.StartCPUProfile(f); err != nil { // -test.cpuprofile runs one already
				f.Close()
				os.Remove(f.Name())
				tb.Logf("profile of the load generator: %v", err)
				return
			}
			select {
			case <-done:
			case <-time.After(slice):
			}
			pprof.StopCPUProfile()
			f.Close()
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		for i, before := range gcs {
			if err := fetchProfile(fmt.Sprintf("http://%s/debug/pprof/allocs", h.http[i]), filepath.Join(dir, fmt.Sprintf("node%d-allocs-end.pprof", i)), 0); err != nil {
				tb.Logf("allocations of node %d: %v", i, err)
			}
			heap, _ := h.metric(ctx, i, "go_memstats_heap_inuse_bytes")
			if v, err := h.metric(ctx, i, "go_gc_duration_seconds_count"); err == nil {
				tb.Logf("node %d ran %v GC cycles from the kill until every group was served again; heap in use at the end %.0f MB", i, v-before, heap/(1<<20))
			}
		}
		// The survivors' logs too: with -e2e.args=--log-level=info they
		// say when the term began serving and how long its takeover took.
		for i, p := range h.nodes {
			if i != victim {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("node%d.log", i)), []byte(p.Output()), 0o644); err != nil {
					tb.Logf("log of node %d: %v", i, err)
				}
			}
		}
		tb.Logf("takeover profiles in %s (go tool pprof -top %s)", dir, filepath.Join(dir, "node*-*.pprof"))
	}
}

// fetchProfile writes what url answers to file, giving up well after the
// slice should have ended.
func fetchProfile(url, file string, slice time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), slice+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
