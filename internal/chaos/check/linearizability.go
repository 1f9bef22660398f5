package check

import (
	"cmp"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The committed offset of a partition is a register: a commit writes it, a
// fetch reads it. No commit yet reads as -1 (Kafka's "no offset"); 0 is
// accepted for it too, as a client may clamp -1 to 0 (the worker resumes
// at max(committed, 0)).

// regInput is a register operation's input.
type regInput struct {
	Write bool
	Value int64 // written (Write)
}

// regMeta says what an operation was, for the visualisation and the
// evidence.
type regMeta struct {
	Index int
	Desc  string
}

// noOffset is the register's initial value.
const noOffset int64 = -1

var registerModel = porcupine.Model{
	Init: func() any { return noOffset },
	Step: func(state, input, output any) (bool, any) {
		s := state.(int64)
		in := input.(regInput)
		if in.Write {
			return true, in.Value
		}
		v := output.(int64)
		return v == s || s == noOffset && v == 0, s
	},
	Hash: func(state any) uint64 { return uint64(state.(int64)) },
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.Write {
			return fmt.Sprintf("commit %d", in.Value)
		}
		return fmt.Sprintf("fetch -> %d", output.(int64))
	},
	DescribeState: func(state any) string { return fmt.Sprint(state.(int64)) },
	DescribeOperationMetadata: func(info any) string {
		if m, ok := info.(regMeta); ok {
			return m.Desc
		}
		return ""
	},
}

// regOp is one operation before it becomes a porcupine.Operation.
type regOp struct {
	client  string
	write   bool
	unknown bool // a commit of unknown outcome
	value   int64
	t0, t1  time.Time
	desc    string
}

// groupPart names one partition of one group.
type groupPart struct {
	Group     string
	Partition int32
}

// landedCodes are the Kafka errors a coordinator may answer to a commit
// it persisted, or whose write it could not settle: a failed store write
// takes the group offline with COORDINATOR_NOT_AVAILABLE (DESIGN.md), a
// deposed leader answers NOT_COORDINATOR. A commit "refused" with one of
// them is checked as of unknown outcome.
var landedCodes = []string{"COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "REQUEST_TIMED_OUT", "COORDINATOR_LOAD_IN_PROGRESS"}

func mayHaveLanded(err string) bool {
	for _, c := range landedCodes {
		if strings.Contains(err, c) {
			return true
		}
	}
	return false
}

// registerOps gathers the offset operations of each partition: the
// workers' commits and fetches (attempt logs) and the consumers'
// (Offsets). Refused commits and failed fetches are left out: a refused
// commit writes nothing, a failed fetch read nothing anyone saw. It also
// counts the refused commits it took as unknown (landedCodes).
func registerOps(run *Run, attempts []Attempt, offsets []OffsetOp) (map[groupPart][]regOp, int) {
	out := make(map[groupPart][]regOp)
	asUnknown := 0
	// A pending commit line is ended by a line of the same commit (same
	// writer, group, partition, offset and T0) with its outcome; one left
	// pending (its writer was killed first) may have landed.
	type commitKey struct {
		writer, group string
		partition     int32
		offset, t0    int64
	}
	ended := make(map[commitKey]bool)
	for _, a := range attempts {
		if a.Op == OpCommit && a.Outcome != OutcomePending {
			ended[commitKey{a.Worker + "/" + a.Member, run.Group, a.Partition, a.Offset, a.T0.UnixNano()}] = true
		}
	}
	// A consumer learns its member ID with the answer: its lines are
	// matched by client.
	for _, o := range offsets {
		if o.Kind == KindCommit && o.Outcome != OffsetPending {
			ended[commitKey{o.Client, o.Group, o.Partition, o.Offset, o.T0.UnixNano()}] = true
		}
	}
	for _, a := range attempts {
		var op regOp
		switch {
		case a.Op == OpCommit && a.Outcome == OutcomeOK:
			op = regOp{write: true}
		case a.Op == OpCommit && a.Outcome == OutcomeError:
			op = regOp{write: true, unknown: true}
		case a.Op == OpCommit && a.Outcome == OutcomePending &&
			!ended[commitKey{a.Worker + "/" + a.Member, run.Group, a.Partition, a.Offset, a.T0.UnixNano()}]:
			op = regOp{write: true, unknown: true}
		case a.Op == OpFetch && a.Outcome == OutcomeOK:
			op = regOp{}
		default:
			continue
		}
		op.client, op.value, op.t0, op.t1 = writer(a.Member, a.Worker), a.Offset, a.T0, a.T1
		op.desc = fmt.Sprintf("by %s [%s, %s] %s", op.client, stamp(a.T0), stamp(a.T1), a.Outcome)
		k := groupPart{run.Group, a.Partition}
		out[k] = append(out[k], op)
	}
	for _, o := range offsets {
		var op regOp
		switch {
		case o.Kind == KindCommit && o.Outcome == OffsetOK:
			op = regOp{write: true}
		case o.Kind == KindCommit && o.Outcome == OffsetError:
			op = regOp{write: true, unknown: true}
		case o.Kind == KindCommit && o.Outcome == OffsetPending &&
			!ended[commitKey{o.Client, o.Group, o.Partition, o.Offset, o.T0.UnixNano()}]:
			op = regOp{write: true, unknown: true}
		case o.Kind == KindCommit && o.Outcome == OffsetRefused && mayHaveLanded(o.Err):
			op = regOp{write: true, unknown: true}
			asUnknown++
		case o.Kind == KindFetch && o.Outcome == OffsetOK:
			op = regOp{}
		default:
			continue
		}
		g := o.Group
		if g == "" {
			g = run.Group
		}
		op.client, op.value, op.t0, op.t1 = o.Client, o.Offset, o.T0, o.T1
		if o.Member != "" {
			op.client += "/" + o.Member
		}
		op.desc = fmt.Sprintf("by %s [%s, %s] %s", op.client, stamp(o.T0), stamp(o.T1), o.Outcome)
		k := groupPart{g, o.Partition}
		out[k] = append(out[k], op)
	}
	return out, asUnknown
}

// operations turns one partition's ops into porcupine's, and counts the
// unknown commits it kept. A commit of unknown outcome may take effect at
// any time after its call, or never: it returns after every other
// operation. One whose value no fetch returned, or that was called after
// every fetch returned, cannot explain any fetch, and is left out (a
// linearization with it at the end is one without it).
func operations(ops []regOp) ([]porcupine.Operation, int) {
	read := make(map[int64]bool)
	var lastRead, end int64 = math.MinInt64, math.MinInt64
	for _, op := range ops {
		end = max(end, op.t0.UnixNano(), op.t1.UnixNano())
		if !op.write {
			read[op.value] = true
			lastRead = max(lastRead, op.t1.UnixNano())
		}
	}
	clients := make(map[string]int)
	for _, op := range ops {
		clients[op.client] = 0
	}
	for i, c := range sortedKeys(clients) {
		clients[c] = i
	}
	var out []porcupine.Operation
	unknown := 0
	for _, op := range ops {
		call, ret := op.t0.UnixNano(), op.t1.UnixNano()
		if ret < call {
			ret = call
		}
		o := porcupine.Operation{ClientId: clients[op.client], Call: call, Return: ret,
			Metadata: regMeta{Index: len(out), Desc: op.desc}}
		if op.write {
			o.Input = regInput{Write: true, Value: op.value}
			if op.unknown {
				if !read[op.value] || call > lastRead {
					continue
				}
				o.Return = end + 1
				unknown++
			}
		} else {
			v := op.value
			if v < 0 {
				v = noOffset
			}
			o.Input, o.Output = regInput{}, v
		}
		out = append(out, o)
	}
	slices.SortStableFunc(out, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	for i := range out {
		m := out[i].Metadata.(regMeta)
		m.Index = i
		out[i].Metadata = m
	}
	return out, unknown
}

// checkLinearizable is check 5: porcupine on each partition's offset
// history, several partitions at once, each bounded by timeout. An illegal
// partition's visualisation goes to outDir if it is not empty.
func checkLinearizable(run *Run, attempts []Attempt, offsets []OffsetOp, timeout time.Duration, outDir string) ([]Linearizability, []Violation, []string) {
	byPart, asUnknown := registerOps(run, attempts, offsets)
	keys := make([]groupPart, 0, len(byPart))
	for k := range byPart {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b groupPart) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Partition, b.Partition))
	})
	results := make([]Linearizability, len(keys))
	vios := make([]*Violation, len(keys))
	notes := make([]string, len(keys))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], vios[i], notes[i] = linearizePartition(run, k, byPart[k], timeout, outDir)
		})
	}
	wg.Wait()
	var vs []Violation
	var ns []string
	if asUnknown > 0 {
		ns = append(ns, fmt.Sprintf("%d refused commits named a coordinator error that may follow a persisted write (%v): checked as of unknown outcome", asUnknown, landedCodes))
	}
	for i := range keys {
		if vios[i] != nil {
			vs = append(vs, *vios[i])
		}
		if notes[i] != "" {
			ns = append(ns, notes[i])
		}
	}
	return results, vs, ns
}

func linearizePartition(run *Run, k groupPart, ops []regOp, timeout time.Duration, outDir string) (Linearizability, *Violation, string) {
	pops, unknown := operations(ops)
	res := Linearizability{Group: k.Group, Partition: k.Partition, Ops: len(pops), Unknown: unknown}
	r := porcupine.CheckOperationsTimeout(registerModel, pops, timeout)
	res.Result = string(r)
	switch r {
	case porcupine.Ok:
		return res, nil, ""
	case porcupine.Unknown:
		return res, nil, fmt.Sprintf("linearizability of group %q partition %d not decided within %v (%d ops, %d unknown)", k.Group, k.Partition, timeout, len(pops), unknown)
	}
	v := &Violation{Kind: NotLinearizable, Partition: k.Partition}
	if k.Group != run.Group {
		v.Group = k.Group
	}
	_, info := porcupine.CheckOperationsVerbose(registerModel, pops, timeout)
	v.Evidence = fmt.Sprintf("%d offset operations (%d commits of unknown outcome)%s", len(pops), unknown, stuck(pops, info))
	note := ""
	if outDir != "" {
		path := filepath.Join(outDir, fmt.Sprintf("linearizability-%s-p%d.html", fileSafe(k.Group), k.Partition))
		err := os.MkdirAll(outDir, 0o755)
		if err == nil {
			err = porcupine.VisualizePath(registerModel, info, path)
		}
		if err != nil {
			note = fmt.Sprintf("visualisation of group %q partition %d: %v", k.Group, k.Partition, err)
		} else {
			res.Visualization = path
			v.Evidence += "; see " + path
		}
	}
	return res, v, note
}

// stuck describes where the longest partial linearization porcupine
// found ends: the first operation (by call) it could not place, and the
// register's value there.
func stuck(ops []porcupine.Operation, info porcupine.LinearizationInfo) string {
	parts := info.PartialLinearizationsOperations()
	if len(parts) == 0 || len(parts[0]) == 0 {
		return ""
	}
	longest := parts[0][0]
	for _, l := range parts[0][1:] {
		if len(l) > len(longest) {
			longest = l
		}
	}
	placed := make(map[int]bool, len(longest))
	state := noOffset
	for _, op := range longest {
		placed[op.Metadata.(regMeta).Index] = true
		if in := op.Input.(regInput); in.Write {
			state = in.Value
		}
	}
	for i, op := range ops {
		if placed[i] {
			continue
		}
		return fmt.Sprintf("; the longest linearization places %d of them, ending with the offset at %d; the first it cannot place: %s %s",
			len(longest), state, registerModel.DescribeOperation(op.Input, op.Output), op.Metadata.(regMeta).Desc)
	}
	return ""
}
