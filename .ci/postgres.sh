# Installs (if needed) and starts a throwaway PostgreSQL cluster on
# 127.0.0.1:${TENURE_PG_PORT:-55432} for the tests, and exports
# TENURE_TEST_POSTGRES with its DSN and TENURE_PG_DIR with its directory.
# Sourced by .ci/run; a developer can source it too:
#
#   . .ci/postgres.sh && start_postgres   # TENURE_PG_PORT=55433 for another port
#   stop_postgres                         # stops it and removes its data
#
# It refuses a port something already listens on rather than hand out
# another server's DSN.

start_postgres() {
	local port="${TENURE_PG_PORT:-55432}"
	if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
		export DEBIAN_FRONTEND=noninteractive
		local sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		$sudo apt-get update -qq || return 1
		$sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null || return 1
	fi
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 1 || (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "postgres: 127.0.0.1:$port is taken (a server from an earlier start_postgres? stop_postgres stops it); set TENURE_PG_PORT to use another port" >&2
		return 1
	fi
	local dir
	dir=$(mktemp -d /tmp/tenure-pg.XXXXXX) || return 1
	local run_as=()
	if [ "$(id -u)" -eq 0 ]; then
		# initdb refuses to run as root.
		chown postgres "$dir" 2>/dev/null || { useradd -r postgres && chown postgres "$dir"; } || return 1
		run_as=(runuser -u postgres --)
	fi
	"${run_as[@]}" "$bin/initdb" -D "$dir/data" -U tenure --auth=trust >/dev/null || return 1
	if ! "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $dir" start >/dev/null; then
		echo "postgres: the server did not start; its log:" >&2
		cat "$dir/log" >&2
		rm -rf "$dir"
		return 1
	fi
	"${run_as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U tenure tenure_test || return 1
	export TENURE_PG_DIR="$dir"
	export TENURE_TEST_POSTGRES="postgres://tenure@127.0.0.1:$port/tenure_test?sslmode=disable"
	echo "postgres: $TENURE_TEST_POSTGRES"
}

# stop_postgres stops the server start_postgres started in this shell and
# removes its data.
stop_postgres() {
	if [ -z "${TENURE_PG_DIR:-}" ]; then
		echo "postgres: no server started from this shell (TENURE_PG_DIR is unset)" >&2
		return 1
	fi
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	local run_as=()
	[ "$(id -u)" -eq 0 ] && run_as=(runuser -u postgres --)
	"${run_as[@]}" "$bin/pg_ctl" -D "$TENURE_PG_DIR/data" -m fast stop >/dev/null || return 1
	rm -rf "$TENURE_PG_DIR"
	unset TENURE_PG_DIR TENURE_TEST_POSTGRES
}
