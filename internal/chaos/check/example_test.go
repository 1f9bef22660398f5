package check_test

import (
	"fmt"
	"os"
	"time"

	"github.com/tenure-dev/tenure/internal/chaos/check"
)

// A runner collects a run into a folder and checks it. Here one member
// owns the one partition at token 3 from revision 2 and writes two records
// to PostgreSQL; then a zombie's write under token 2, which no ownership
// ever had, was accepted: the fence was off.
func Example() {
	t0 := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	in := &check.Input{
		Run: check.Run{Seed: 42, Group: "chaos", Topic: "jobs", Partitions: 1, Prefix: "/tenure/",
			SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second},
		History: []check.KV{
			{Rev: 1, Key: []byte("/tenure/groups/chaos/group"), Value: []byte(`{"t":2,"e":3,"p":"uniform"}`)},
			{Rev: 1, Key: []byte("/tenure/groups/chaos/members/m1"), Value: []byte(`{"c":"w1","ts":["jobs"]}`)},
			{Rev: 2, Key: []byte("/tenure/groups/chaos/assignments/m1"), Value: []byte(`{"e":3,"o":[{"t":"jobs","p":[0],"k":[3]}]}`)},
		},
		RevTimes: []check.RevTime{{Rev: 2, T: t0}, {Rev: 2, T: t0.Add(30 * time.Second)}},
		Rows: []check.Row{
			{Resource: "postgres", Partition: 0, Seq: 0, Token: 3, Worker: "w1", Member: "m1", Order: 1},
			{Resource: "postgres", Partition: 0, Seq: 1, Token: 3, Worker: "w1", Member: "m1", Order: 2},
			{Resource: "postgres", Partition: 0, Seq: 1, Token: 2, Worker: "w2", Member: "m2", Order: 3},
		},
	}
	dir, err := os.MkdirTemp("", "chaos-run")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := check.Write(dir, in); err != nil {
		panic(err)
	}
	loaded, err := check.Load(dir)
	if err != nil {
		panic(err)
	}
	r, err := check.Check(loaded, check.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.OK())
	for _, v := range r.Violations {
		fmt.Println(v)
	}
	// Output:
	// false
	// token-order postgres p0: row seq 1 token 2 by m2 accepted at order 3, after token 3 (seq 0 by m1, order 1)
	// unauthorised postgres p0: row seq 1 token 2 (order 3) by m2, which never held it at that token; holders at token 2: [none]
}
