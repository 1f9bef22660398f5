#!/usr/bin/env bash
# Prints one line for each suite of `make test` that will skip because a
# tool or server it needs is missing, and how to provide it: go test does
# not show skips without -v. With TENURE_REQUIRE_TOOLS=1 (CI) those suites
# fail instead, and it prints nothing. Uses bash builtins only.

[ "${TENURE_REQUIRE_TOOLS:-}" = 1 ] && exit 0

if ! command -v promtool >/dev/null; then
	echo "make test: skipping the alert rules' promtool tests (deploy): promtool is not on PATH (apt-get install --no-install-recommends prometheus)"
fi
if ! command -v chromium >/dev/null; then
	echo "make test: skipping the status page's browser test (coordinator/web): chromium is not installed (apt-get install chromium)"
fi
# A DSN given in TENURE_TEST_POSTGRES makes the PostgreSQL tests fail, not
# skip, without a server; without one they try .ci/postgres.sh's.
if [ -z "${TENURE_TEST_POSTGRES:-}" ] && [ -z "${CI:-}" ] &&
	! (exec 3<>"/dev/tcp/127.0.0.1/${TENURE_PG_PORT:-55432}") 2>/dev/null; then
	echo "make test: skipping the PostgreSQL tests (epoch/sqlfence and the workload's): no server on 127.0.0.1:${TENURE_PG_PORT:-55432} (. .ci/postgres.sh && start_postgres starts one)"
fi
exit 0
