#!/bin/bash
# tools/bench/decode_mem.sh - the peak memory of decoding hostile load
# answers, the decoders of an old tree beside this tree's (make bench-decode-mem).
#
#   tools/bench/decode_mem.sh [OLD]
#
# OLD is a source tree (a directory), or a commit of this repository, taken
# with git archive (default 31cd3db, the decoders before the hardening). NEW
# is the tree this script is in, as it is on disk. For each, decode_mem
# (tools/bench/decode_mem.c, this tree's) is linked with the tree's own
# decoders and what they use: user/loads/decode_json.c, decode_grpc.c and
# names.c, user/policy, user/common, and the GetLoads protobuf-c code that the
# tree's Makefile generates (its $(O)/proto/*.pb-c.c rule). -O2, no
# sanitizer: the figures are glibc malloc's. Each answer is decoded in a
# process of its own; the table has the peak RSS (VmHWM) the decode call
# added, in MiB, and the answers' reasons follow it. No root, nothing is
# written outside a temporary directory, removed at the end. About a minute.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
old=${1:-31cd3db}
CC=${CC:-gcc}
CFLAGS_DM="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wno-missing-field-initializers"
PROTOS="sglang_scheduler tokenspeed_scheduler vllm_engine"
ANSWERS="json-empty-ranks json-integers pb-empty-loads pb-unknown-fields json-real-1024"

tmp=$(mktemp -d /tmp/decode_mem.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if [ -d "$old" ]; then
	old_src=$(cd "$old" && pwd)
	old_name=$old_src
else
	old_src=$tmp/old-src
	mkdir -p "$old_src"
	git -C "$top" archive "$old" | tar -x -C "$old_src"
	old_name="commit $old (git archive)"
fi

# build TREE OUT: OUT/decode_mem with TREE's decoders.
build() {
	local tree=$1 out=$2 p gen=()

	mkdir -p "$out"
	for p in $PROTOS; do
		gen+=("$out/proto/$p.pb-c.c")
	done
	# The tree's own rule; nothing of the calling make (O, SAN) leaks in.
	env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$tree" O="$out" "${gen[@]}"
	# shellcheck disable=SC2086
	$CC $CFLAGS_DM -I"$tree/user" -I"$tree/bpf" -I"$out/proto" \
		"$top/tools/bench/decode_mem.c" \
		"$tree"/user/loads/decode_json.c "$tree"/user/loads/decode_grpc.c \
		"$tree"/user/loads/names.c "$tree"/user/policy/*.c "$tree"/user/common/*.c \
		"${gen[@]}" -o "$out/decode_mem" -ljson-c -lprotobuf-c -lm
}

build "$old_src" "$tmp/old"
build "$top" "$tmp/new"

# field LINE NAME: the value of NAME= in a line of decode_mem.
field() {
	sed -n "s/.* $2=\"\{0,1\}\([^\" ]*\).*/\1/p" <<<"$1"
}
detail() {
	sed -n 's/.* detail="\([^"]*\)".*/\1/p' <<<"$1"
}
# run WHICH ANSWER: decode_mem's line, or a stand-in when it failed.
run() {
	local line rc=0

	line=$("$tmp/$1/decode_mem" "$2" 2>&1) || rc=$?
	if [ $rc -ne 0 ] || ! grep -q '^answer=' <<<"$line"; then
		echo "answer=$2 bytes=? kind=failed(exit-$rc) detail=\"${line:0:80}\" delta_mib=?"
	else
		echo "$line"
	fi
}

echo "old: $old_name"
echo "new: $top (working tree)"
echo
echo "| answer | bytes | old: result, peak delta MiB | new: result, peak delta MiB |"
echo "|---|---:|---|---|"
declare -A reason
for a in $ANSWERS; do
	o=$(run old "$a")
	n=$(run new "$a")
	do=$(detail "$o")
	dn=$(detail "$n")
	reason[$a]="old: ${do:-(none)} / new: ${dn:-(none)}"
	printf '| %s | %s | %s, %s | %s, %s |\n' "$a" "$(field "$n" bytes)" \
		"$(field "$o" kind)" "$(field "$o" delta_mib)" \
		"$(field "$n" kind)" "$(field "$n" delta_mib)"
done
echo
for a in $ANSWERS; do
	echo "- $a: ${reason[$a]}"
done
