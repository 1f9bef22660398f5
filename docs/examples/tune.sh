#!/usr/bin/env bash
# tune: a small `tenure tune` search (two heartbeat intervals, two
# session timeouts, three scenarios, four seeds) that runs in seconds; a
# search with no flags covers the whole space and every built-in scenario.
. "$(dirname "$0")/lib.sh"

run 'bin/tenure tune --scenarios crash,gc-pauses,rolling-restart --heartbeats 250ms,1s \
    --sessions 10s,20s --margins 1s --rebalances 1m --static false --seeds 4'
