#!/bin/sh
# apply.sh IN OUT DEPFILE PATCHDIR - the test copy of one library source:
# IN as it is, or IN with PATCHDIR/<name of IN>.patch applied (the broken
# variants and test hooks of tests/mutants/README).  Run by the generator
# of src/meson.build for every source of srl_test; the shipped library
# compiles src/ untouched.  A patch that no longer applies exactly (its
# context edited since) fails the build with what to do, never half-applies.
set -u
in=$1 out=$2 dep=$3 dir=$4
p="$dir/$(basename "$in").patch"
rm -f "$out"
if [ -f "$p" ]; then
    if ! patch --quiet --force --fuzz=0 --no-backup-if-mismatch -r - -o "$out" "$in" <"$p" >"$out.log" 2>&1; then
        cat "$out.log" >&2
        echo "$p no longer applies to $in: refresh it (tests/mutants/README, tools/dev/mutant-patch)" >&2
        rm -f "$out" "$out.log"
        exit 1
    fi
    rm -f "$out.log"
    printf '%s: %s %s\n' "$out" "$p" "$dir" >"$dep"
else
    cp "$in" "$out"
    printf '%s: %s\n' "$out" "$dir" >"$dep"
fi
