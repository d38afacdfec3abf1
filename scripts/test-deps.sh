#!/bin/sh
# test-deps.sh: what `make test` needs besides Go, checked in well under a second, installed when possible.
#
#   redis-server, redis-cli  every test runs against real Redis processes the tests start (Debian: redis-server,
#                            redis-tools)
#   chromium                 the dashboard test drives headless Chromium (Debian: chromium)
#   node (18 or newer)       the dashboard's JavaScript tests run with `node --test` (Debian: nodejs)
#   initdb, postgres         the ledger's tests and lbbench start real PostgreSQL servers (Debian: postgresql); like
#                            internal/pgserver, the script looks on PATH, then in `pg_config --bindir`, then in
#                            /usr/lib/postgresql/*/bin (its tests name another directory in LB_TEST_DEPS_PG_LIBDIR)
#
# When something is missing and the script runs as root, or sudo works without a password, on a system with
# apt-get (Debian, Ubuntu), it installs the packages above with apt-get. Otherwise it prints one line per missing
# tool with the command that installs it and exits with status 1, before any test runs.
# LB_TEST_DEPS_INSTALL=0 only checks (never installs).
set -u

missing=""   # "tool:package" words
report=""

have() { command -v "$1" >/dev/null 2>&1; }

have_pg() { # a PostgreSQL program: on PATH, in pg_config --bindir, or in <libdir>/<version>/bin
	have "$1" && return 0
	if have pg_config; then
		pg_bindir=$(pg_config --bindir 2>/dev/null) && [ -n "$pg_bindir" ] && [ -x "$pg_bindir/$1" ] && return 0
	fi
	for pg_bindir in "${LB_TEST_DEPS_PG_LIBDIR:-/usr/lib/postgresql}"/*/bin; do
		[ -x "$pg_bindir/$1" ] && return 0
	done
	return 1
}

check() {
	missing=""
	report=""
	have redis-server || add redis-server redis-server "the tests start real Redis servers"
	have redis-cli || add redis-cli redis-tools "the tests create a Redis Cluster with redis-cli"
	if ! have chromium && ! have chromium-browser && ! have google-chrome; then
		add chromium chromium "the dashboard test drives headless Chromium"
	fi
	if ! have node; then
		add node nodejs "the dashboard's JavaScript tests run with node --test"
	elif ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)' >/dev/null 2>&1; then
		add node nodejs "node is $(node --version 2>/dev/null), the JavaScript tests need Node.js 18 or newer"
	fi
	have_pg initdb || add initdb postgresql "the ledger's tests create PostgreSQL clusters with initdb"
	have_pg postgres || add postgres postgresql "the ledger's tests start real PostgreSQL servers"
}

add() { # tool package why
	missing="$missing $1:$2"
	report="$report
test-deps: missing $1 ($3): install it with: apt-get install -y $2"
}

check
[ -z "$missing" ] && exit 0

packages=""
for m in $missing; do
	case "$packages " in
	*" ${m#*:} "*) ;; # initdb and postgres come in one package
	*) packages="$packages ${m#*:}" ;;
	esac
done

if [ "${LB_TEST_DEPS_INSTALL:-1}" != 0 ] && have apt-get; then
	as_root=""
	if [ "$(id -u 2>/dev/null)" = 0 ]; then
		as_root=" "
	elif have sudo && sudo -n true 2>/dev/null; then
		as_root="sudo"
	fi
	if [ -n "$as_root" ]; then
		echo "test-deps: installing$packages with apt-get" >&2
		$as_root apt-get update -qq >&2 &&
			$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >&2
		check
		[ -z "$missing" ] && exit 0
	fi
fi
printf '%s\n' "$report" | sed '/^$/d' >&2
echo "test-deps: make test needs the tools above; install them and run it again" >&2
exit 1
