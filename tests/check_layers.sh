#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_layers.sh: every #include "..." of the library, codegen and the launcher stays inside
# what its layer may use (docs/DESIGN.md, "Layers"):
#   launcher/        include/ and its own folder
#   runtime/core/    include/ and runtime/core/
#   codegen/         include/, runtime/core/ and codegen/
#   runtime/         include/ and runtime/; runtime/cuda/ also codegen/codegen.h
# config.h (configure's) is allowed everywhere. The build's per-target include paths make most
# wrong includes fail to compile; this also catches a relative path that reaches around them.
#
# Run by `make check` (which sets WSNORM_SRCDIR), or: WSNORM_SRCDIR=. sh tests/check_layers.sh
# Exit status: 0 all good, 1 an include crosses a layer (each one is printed).

srcdir=${WSNORM_SRCDIR:-$(dirname "$0")/..}
srcdir=$(cd "$srcdir" && pwd) || exit 1
cd "$srcdir" || exit 1
[ -d runtime/core ] && [ -d codegen ] && [ -d launcher ] || { echo "check_layers: $srcdir is not a wsnorm tree"; exit 1; }

fail=0
files=0
# resolve FILE INCLUDE: print the included file's path relative to the tree, as the compiler
# would find it (the including file's folder first, then the include paths of Makefile.am)
resolve() {
	dir=$(dirname "$1")
	for base in "$dir" include runtime codegen; do
		if [ -f "$base/$2" ]; then
			# normalise a/b/../c
			p=$(cd "$(dirname "$base/$2")" && pwd)/$(basename "$2")
			echo "${p#"$srcdir"/}"
			return
		fi
	done
	echo "?$2"
}

allowed() { # allowed FILE TARGET: 0 when FILE's layer may include TARGET
	case "$2" in
	include/*) return 0 ;;
	esac
	case "$1" in
	launcher/*) case "$2" in launcher/*) return 0 ;; esac ;;
	runtime/core/*) case "$2" in runtime/core/*) return 0 ;; esac ;;
	codegen/*) case "$2" in runtime/core/* | codegen/*) return 0 ;; esac ;;
	runtime/cuda/*) case "$2" in runtime/* | codegen/codegen.h) return 0 ;; esac ;;
	runtime/*) case "$2" in runtime/*) return 0 ;; esac ;;
	esac
	return 1
}

for f in $(find launcher runtime codegen -name '*.[ch]' | sort); do
	files=$((files + 1))
	for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
		[ "$inc" = config.h ] && continue
		target=$(resolve "$f" "$inc")
		case "$target" in
		\?*) echo "check_layers: $f includes \"$inc\", which is not in the tree"; fail=1; continue ;;
		esac
		if ! allowed "$f" "$target"; then
			echo "check_layers: $f includes \"$inc\" ($target): not allowed for its layer (docs/DESIGN.md)"
			fail=1
		fi
	done
done
[ $fail -eq 0 ] && echo "check_layers: $files files, every include within its layer"
exit $fail
