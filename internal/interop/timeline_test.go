package interop

import (
	"strings"
	"testing"
	"time"
)

func at(sec float64) float64 { return 1e6 + sec*1e3 }

func TestAnalyze(t *testing.T) {
	from, to := time.UnixMilli(1e6+10e3), time.UnixMilli(1e6+20e3)
	cases := []struct {
		name   string
		events map[string][]Event
		want   Ownership
	}{{
		name: "steady: owned once throughout",
		events: map[string][]Event{
			"a": {{T: at(1), Ev: "assigned", Partitions: []int32{0, 1}}},
			"b": {{T: at(2), Ev: "assigned", Partitions: []int32{2, 3}}},
		},
	}, {
		name: "revokes while settling do not count",
		events: map[string][]Event{
			"a": {{T: at(1), Ev: "assigned", Partitions: []int32{0, 1, 2, 3}}, {T: at(3), Ev: "revoked", Partitions: []int32{2, 3}}},
			"b": {{T: at(4), Ev: "assigned", Partitions: []int32{2, 3}}},
		},
	}, {
		name: "a lost session leaves its partitions unowned until a rejoin",
		events: map[string][]Event{
			"a": {{T: at(1), Ev: "assigned", Partitions: []int32{0, 1}}, {T: at(12), Ev: "lost", Partitions: []int32{0, 1}},
				{T: at(15), Ev: "assigned", Partitions: []int32{0, 1}}},
			"b": {{T: at(2), Ev: "assigned", Partitions: []int32{2, 3}}},
		},
		want: Ownership{Lost: 1, Unowned: 6 * time.Second},
	}, {
		name: "an eager rejoin revokes everything",
		events: map[string][]Event{
			"a": {{T: at(1), Ev: "assigned", Partitions: []int32{0, 1, 2, 3}}, {T: at(11), Ev: "revoked", Partitions: []int32{0, 1, 2, 3}},
				{T: at(11.5), Ev: "assigned", Partitions: []int32{0, 1, 2, 3}}},
		},
		want: Ownership{Revoked: 1, Unowned: 2 * time.Second},
	}, {
		name: "a driver that exits loses what it owned",
		events: map[string][]Event{
			"a": {{T: at(1), Ev: "assigned", Partitions: []int32{0, 1}}, {T: at(18), Ev: "exited"}},
			"b": {{T: at(2), Ev: "assigned", Partitions: []int32{2, 3}}},
		},
		want: Ownership{Lost: 1, Unowned: 4 * time.Second},
	}, {
		name: "two owners at once",
		events: map[string][]Event{
			"a": {{T: at(1), Ev: "assigned", Partitions: []int32{0, 1, 2, 3}}},
			"b": {{T: at(19), Ev: "assigned", Partitions: []int32{3}}},
		},
		want: Ownership{Double: time.Second},
	}, {
		name: "what a stopping driver does is not measured",
		events: map[string][]Event{
			"a": {{T: at(1), Ev: "assigned", Partitions: []int32{0, 1, 2, 3}}, {T: at(19), Ev: "stopping"}, {T: at(19.5), Ev: "revoked", Partitions: []int32{0, 1, 2, 3}}},
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Analyze(c.events, 4, from, to); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestSettled(t *testing.T) {
	now := time.UnixMilli(1e6 + 10e3)
	ev := map[string][]Event{
		"a": {{T: at(1), Ev: "assigned", Partitions: []int32{0, 1}}},
		"b": {{T: at(2), Ev: "assigned", Partitions: []int32{2}}},
	}
	if Settled(ev, 4, now, time.Second) {
		t.Fatal("settled with partition 3 unowned")
	}
	ev["b"] = append(ev["b"], Event{T: at(8), Ev: "assigned", Partitions: []int32{3}})
	if !Settled(ev, 4, now, time.Second) {
		t.Fatal("not settled")
	}
	if Settled(ev, 4, now, 3*time.Second) {
		t.Fatal("settled 2 s after the last change, want 3 s of quiet")
	}
	ev["a"] = append(ev["a"], Event{T: at(1.5), Ev: "assigned", Partitions: []int32{3}})
	if Settled(ev, 4, now, time.Second) {
		t.Fatal("settled with partition 3 owned twice")
	}
}

func TestReadEvents(t *testing.T) {
	in := `{"t":1000.5,"ev":"assigned","partitions":[1,2]}
%3|librdkafka noise
{"t": 1001, "ev": "lost", "partitions": [1]}
{"ev":"no time"}
`
	got, err := ReadEvents(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Ev != "assigned" || len(got[0].Partitions) != 2 || got[1].Ev != "lost" || got[0].Time() != time.UnixMicro(1000500) {
		t.Fatalf("got %+v", got)
	}
}
