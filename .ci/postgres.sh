# Installs (if needed) and starts a throwaway PostgreSQL cluster on
# 127.0.0.1:${TENURE_PG_PORT:-55432} for the tests, and exports
# TENURE_TEST_POSTGRES with its DSN. Sourced by .ci/run; a developer can
# source it too.

start_postgres() {
	local port="${TENURE_PG_PORT:-55432}"
	if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
		export DEBIAN_FRONTEND=noninteractive
		local sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		$sudo apt-get update -qq
		$sudo apt-get install -y -qq --no-install-recommends postgresql >/dev/null
	fi
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	local dir
	dir=$(mktemp -d /tmp/tenure-pg.XXXXXX)
	local run_as=()
	if [ "$(id -u)" -eq 0 ]; then
		# initdb refuses to run as root.
		chown postgres "$dir" 2>/dev/null || { useradd -r postgres && chown postgres "$dir"; }
		run_as=(runuser -u postgres --)
	fi
	"${run_as[@]}" "$bin/initdb" -D "$dir/data" -U tenure --auth=trust >/dev/null
	"${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $dir" start >/dev/null
	"${run_as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U tenure tenure_test
	export TENURE_TEST_POSTGRES="postgres://tenure@127.0.0.1:$port/tenure_test?sslmode=disable"
	echo "postgres: $TENURE_TEST_POSTGRES"
}
