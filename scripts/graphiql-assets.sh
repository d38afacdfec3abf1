#!/bin/sh
# Fetches the GraphiQL page's assets from npm again (web/graphiql/vendor.txt lists package, file, asset name and
# the sha256 SRI each must have) and replaces web/graphiql/assets/ only when every file matches its hash.
# Usage: scripts/graphiql-assets.sh   (make graphiql-assets). Needs npm and network access to the npm registry.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
list="$root/web/graphiql/vendor.txt"
out="$root/web/graphiql/assets"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/new"
grep -v '^#' "$list" | while read -r pkg file asset sri; do
	[ -n "$pkg" ] || continue
	dir="$tmp/pkg/$pkg"
	if [ ! -d "$dir" ]; then
		mkdir -p "$dir"
		(cd "$dir" && npm pack --silent "$pkg" >/dev/null && tar xzf ./*.tgz)
	fi
	cp "$dir/package/$file" "$tmp/new/$asset"
	if [ "$sri" != "-" ]; then
		got="sha256-$(openssl dgst -sha256 -binary "$tmp/new/$asset" | base64)"
		if [ "$got" != "$sri" ]; then
			echo "graphiql-assets: $pkg $file has $got, vendor.txt says $sri" >&2
			exit 1
		fi
	fi
	echo "$pkg $file -> $asset"
done
rm -rf "$out"
mv "$tmp/new" "$out"
