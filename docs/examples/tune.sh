#!/usr/bin/env bash
# tune: a small `tenure tune` search (two heartbeat intervals, two
# session timeouts, keepalive off or 20 s, three scenarios, four seeds)
# that runs in seconds; a search with no flags covers a wider space and
# every built-in scenario, and --full the whole space.
. "$(dirname "$0")/lib.sh"

run 'bin/tenure tune --scenarios crash,gc-pauses,host-crash --heartbeats 250ms,1s \
    --sessions 20s,30s --margins 1s --rebalances 1m --keepalives 0,20s --static false --seeds 4'
