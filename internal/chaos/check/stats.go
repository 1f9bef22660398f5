package check

// countStats fills the counts of st: faults, resources, commits.
func countStats(in *Input, st *Stats) {
	faults := make(map[string]int)
	for _, f := range in.Run.Faults {
		faults[f.Kind]++
	}
	for _, k := range sortedKeys(faults) {
		st.Faults = append(st.Faults, FaultCount{Kind: k, Count: faults[k]})
	}

	res := make(map[string]*ResourceStats)
	get := func(name string) *ResourceStats {
		if res[name] == nil {
			res[name] = &ResourceStats{Resource: name}
		}
		return res[name]
	}
	workers := CommitStats{Source: "workers"}
	for _, a := range in.Attempts {
		switch a.Op {
		case OpAppend:
			rs := get(a.Resource)
			rs.Appends++
			switch a.Outcome {
			case OutcomeOK:
				rs.Accepted++
			case OutcomeStale:
				rs.Stale++
			case OutcomeUnverified:
				rs.Unverified++
			default:
				rs.Errors++
			}
			if a.Held {
				rs.Held++
				if a.Outcome == OutcomeOK {
					rs.HeldAccepted++
				}
			}
		case OpAdmit:
			rs := get(a.Resource)
			rs.Admits++
			if a.Outcome == OutcomeStale {
				rs.AdmitsStale++
			}
		case OpCommit:
			if a.Outcome == OutcomePending {
				continue // the line that ends it counts, or nothing
			}
			workers.Commits++
			switch a.Outcome {
			case OutcomeOK:
				workers.OK++
			case OutcomeStale:
				workers.Refused++
			default:
				workers.Unknown++
			}
		case OpFetch:
			workers.Fetches++
			if a.Outcome == OutcomeOK {
				workers.FetchesOK++
			}
		}
	}
	for _, r := range in.Rows {
		get(r.Resource).Rows++
	}
	for _, k := range sortedKeys(res) {
		st.Resources = append(st.Resources, *res[k])
	}

	consumers := CommitStats{Source: "consumers"}
	for _, o := range in.Offsets {
		switch o.Kind {
		case KindCommit:
			if o.Outcome == OffsetPending {
				continue
			}
			consumers.Commits++
			switch o.Outcome {
			case OffsetOK:
				consumers.OK++
			case OffsetRefused:
				consumers.Refused++
			default:
				consumers.Unknown++
			}
		case KindFetch:
			consumers.Fetches++
			if o.Outcome == OffsetOK {
				consumers.FetchesOK++
			}
		}
	}
	st.Commits = []CommitStats{workers, consumers}
}
