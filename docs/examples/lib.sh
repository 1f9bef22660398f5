# Helpers of the example scripts in this directory, sourced by each. A
# script prints every command it runs, after "$ ", as a terminal shows it,
# followed by the command's output: its output is the transcript that
# README.md shows, and internal/readme checks that the two agree. What the
# helpers do besides (waiting, cleaning up) is not printed.
#
# The scripts run from the repository root after `make build`, as the
# README's commands do.

set -euo pipefail

# run CMD prints CMD and runs it in this shell; the script fails with it.
run() {
	printf '$ %s\n' "$1"
	eval "$1"
}

# start NAME CMD prints CMD as started in the background with its output
# in NAME.log, and starts it; every process started so is stopped when the
# script ends.
start() {
	printf '$ %s > %s.log 2>&1 &\n' "$2" "$1"
	# exec, so that $! is the command's process, not a subshell's.
	eval "exec $2" >"$1.log" 2>&1 &
	started_pids+=("$!")
	started_names+=("$1")
}

# wait_for FILE PATTERN [COUNT] waits up to 60 s for COUNT (default 1)
# lines of FILE to match the extended regular expression PATTERN. It fails
# at once if a process started with start has exited.
wait_for() {
	local n
	for _ in $(seq 600); do
		n=$(grep -cE -- "$2" "$1" 2>/dev/null || true)
		[ "${n:-0}" -ge "${3:-1}" ] && return 0
		check_started || return 1
		sleep 0.1
	done
	echo "example: no ${3:-1} lines matching '$2' in $1 after 60 s" >&2
	return 1
}

# wait_until CMD waits up to 60 s for CMD to succeed, quietly.
wait_until() {
	for _ in $(seq 300); do
		eval "$1" >/dev/null 2>&1 && return 0
		check_started || return 1
		sleep 0.2
	done
	echo "example: '$1' did not succeed within 60 s" >&2
	return 1
}

# check_started fails if a process started with start has exited.
check_started() {
	local i
	for i in ${started_pids[@]+"${!started_pids[@]}"}; do
		if ! kill -0 "${started_pids[$i]}" 2>/dev/null; then
			echo "example: ${started_names[$i]} exited early" >&2
			return 1
		fi
	done
}

# scratch_dir moves the script into a new directory, removed when it ends,
# in which bin/tenure is the repository's: the logs of the processes it
# starts go there.
scratch_dir() {
	if [ ! -x bin/tenure ]; then
		echo "example: no bin/tenure here: run the example from the repository root after make build" >&2
		exit 1
	fi
	local bin
	bin=$(cd bin && pwd)
	scratch=$(mktemp -d "${TMPDIR:-/tmp}/tenure-example.XXXXXX")
	ln -s "$bin" "$scratch/bin"
	cd "$scratch"
}

# at_exit CMD runs CMD, quietly, when the script ends, after the processes
# it started have stopped.
at_exit() {
	exit_cmds+=("$1")
}

started_pids=()
started_names=()
exit_cmds=()
scratch=""

# cleanup fails a script whose shown commands left a started process
# running, then stops the started processes, last started first (workers drain
# while their coordinator still answers), each with SIGTERM and, after
# 15 s, SIGKILL; then it runs the at_exit commands, and shows the logs if
# the script failed.
cleanup() {
	local status=$? i pid cmd log
	# A reader pastes the commands in order: what a demo starts, its own
	# last command must stop, or the next demo finds its address taken.
	if [ "$status" -eq 0 ]; then
		for i in ${started_pids[@]+"${!started_pids[@]}"}; do
			if kill -0 "${started_pids[$i]}" 2>/dev/null; then
				echo "example: ${started_names[$i]} still runs after the last command: stop what the example starts with a command it shows" >&2
				status=1
			fi
		done
	fi
	for ((i = ${#started_pids[@]} - 1; i >= 0; i--)); do
		pid=${started_pids[$i]}
		kill "$pid" 2>/dev/null || continue
		for _ in $(seq 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	for cmd in ${exit_cmds[@]+"${exit_cmds[@]}"}; do
		eval "$cmd" >/dev/null 2>&1 || true
	done
	if [ "$status" -ne 0 ] && [ -n "$scratch" ]; then
		for log in "$scratch"/*.log; do
			[ -e "$log" ] || continue
			printf '\n== %s (last 40 lines)\n' "${log##*/}" >&2
			tail -n 40 "$log" >&2
		done
	fi
	[ -z "$scratch" ] || rm -rf "$scratch"
	exit "$status"
}
trap cleanup EXIT
