#!/bin/sh
# check_readme_apt.sh README CONTROL - README's "sudo apt install ../*.deb"
# line names every binary package of debian/control, so following it leaves
# nothing out (without libsrl-dev, the C section's `pkg-config --cflags
# --libs srl` failed right after it).
set -u
line=$(grep -m1 '^sudo apt install \.\./' "$1") || { echo "$1: no 'sudo apt install ../' line" >&2; exit 1; }
status=0 n=0
for p in $(sed -n 's/^Package: *//p' "$2"); do
    n=$((n + 1))
    case " $line " in
    *" ../${p}_"*) ;;
    *) echo "$1: the apt line leaves out $p (debian/control)" >&2; status=1 ;;
    esac
done
[ "$n" -gt 0 ] || { echo "$2: no Package: lines" >&2; exit 1; }
[ "$status" -ne 0 ] || echo "the apt line names all $n packages"
exit $status
