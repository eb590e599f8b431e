#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/check_man.sh: every public function has a man page, Makefile.am installs every page,
# and every page renders without a warning.
#
# Run by `make check` (which sets WSNORM_SRCDIR), or by hand:
#   WSNORM_SRCDIR=/path/to/wsnorm sh tests/check_man.sh
# Exit status: 0 all good, 1 a check failed, 77 skipped (groff not installed).

srcdir=${WSNORM_SRCDIR:-$(dirname "$0")/..}
fail=0

problem() {
	echo "check_man: $*"
	fail=1
}

if [ ! -d "$srcdir/man" ] || [ ! -d "$srcdir/include" ] || [ ! -f "$srcdir/Makefile.am" ]; then
	echo "check_man: $srcdir is not a wsnorm source tree (set WSNORM_SRCDIR)"
	exit 1
fi
srcdir=$(cd "$srcdir" && pwd) || exit 1
man=$srcdir/man

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check_man.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# (a) every function marked WSN_API in the public headers has a page (or a .so stub) of its name
find "$srcdir/include" -name '*.h' -exec cat {} + |
	sed -n 's/.*WSN_API[^(]*[^a-zA-Z0-9_]\(wsn_[a-zA-Z0-9_]*\)[ 	]*(.*/\1/p' |
	sort -u >"$tmp/api"
if [ ! -s "$tmp/api" ]; then
	problem "no WSN_API function found under $srcdir/include"
fi
while read -r fn; do
	[ -f "$man/$fn.3" ] || problem "$fn: no man page man/$fn.3"
done <"$tmp/api"

# (b) dist_man_MANS in Makefile.am lists exactly the pages in man/
awk '
	/^dist_man_MANS[ \t]*\+?=/ { on = 1; sub(/^[^=]*=/, "") }
	on {
		more = /\\[ \t]*$/
		sub(/\\[ \t]*$/, "")
		for (i = 1; i <= NF; i++) print $i
		if (!more) on = 0
	}
' "$srcdir/Makefile.am" | sort -u >"$tmp/listed"
if [ ! -s "$tmp/listed" ]; then
	problem "Makefile.am: no dist_man_MANS list"
fi
while read -r page; do
	[ -f "$srcdir/$page" ] || problem "Makefile.am: dist_man_MANS lists $page, which does not exist"
done <"$tmp/listed"
for page in "$man"/*.[13]; do
	[ -f "$page" ] || continue
	rel=man/${page##*/}
	grep -Fqx "$rel" "$tmp/listed" || problem "$rel is not listed in dist_man_MANS in Makefile.am"
done

# (b2) libwsnorm(3) SEE ALSO names every public function, the index a reader starts from
sed -n '/^\.SH "*SEE ALSO"*$/,$p' "$man/libwsnorm.3" | sed -n 's/^\.BR \(wsn_[a-zA-Z0-9_]*\) (3).*/\1/p' |
	sort -u >"$tmp/seealso"
while read -r fn; do
	grep -Fqx "$fn" "$tmp/seealso" || problem "libwsnorm.3: SEE ALSO does not name $fn(3)"
done <"$tmp/api"

# (b3) no control characters but tabs in a page (an escape such as \f written through a language
# that took it for a form feed renders as nothing groff warns about)
for page in "$man"/*.[13]; do
	[ -f "$page" ] || continue
	if LC_ALL=C grep -q "$(printf '[\001-\010\013-\037\177]')" "$page"; then
		problem "${page##*/}: a control character (line $(LC_ALL=C grep -n "$(printf '[\001-\010\013-\037\177]')" "$page" | head -1 | cut -d: -f1))"
	fi
done

# (c) every page renders cleanly: groff with all warnings on, nothing on stderr. Stubs (.so
# man3/x.3) are resolved as they will be once installed, through man1/ and man3/ links to man/.
if ! command -v groff >/dev/null 2>&1; then
	echo "check_man: groff is not installed: cannot check that the pages render (skipped)"
	[ "$fail" = 0 ] && exit 77
	exit 1
fi
mkdir "$tmp/inc" && ln -s "$(cd "$man" && pwd)" "$tmp/inc/man1" && ln -s "$(cd "$man" && pwd)" "$tmp/inc/man3" || exit 1
pages=0
for page in "$man"/*.[13]; do
	[ -f "$page" ] || continue
	pages=$((pages + 1))
	first=$(sed -n '1p' "$page")
	case $first in
	.so\ *)
		target=${first#.so }
		[ -f "$tmp/inc/$target" ] || { problem "${page##*/}: .so target $target does not exist"; continue; }
		# a stub must be the single .so line, so that man-db treats it as a link
		[ "$(wc -l <"$page")" -eq 1 ] || problem "${page##*/}: a .so stub must hold only the .so line"
		;;
	*)
		grep -q '^\.TH ' "$page" || problem "${page##*/}: no .TH line"
		for section in NAME SYNOPSIS DESCRIPTION "SEE ALSO"; do
			grep -q "^\.SH \"*$section\"*\$" "$page" || problem "${page##*/}: no $section section"
		done
		case $page in
		*/wsnorm.1)
			for section in OPTIONS COMMANDS FILES ENVIRONMENT "EXIT STATUS" EXAMPLES; do
				grep -q "^\.SH \"*$section\"*\$" "$page" || problem "${page##*/}: no $section section"
			done
			;;
		*/wsn_*.3)
			for section in "RETURN VALUE" ERRORS; do
				grep -q "^\.SH \"*$section\"*\$" "$page" || problem "${page##*/}: no $section section"
			done
			grep -q 'Link with \\fI\\-lwsnorm\\fP\.' "$page" || problem "${page##*/}: no 'Link with -lwsnorm' line"
			;;
		esac
		;;
	esac
	groff -t -man -Tutf8 -ww -z -I"$tmp/inc" "$page" >"$tmp/out" 2>"$tmp/err"
	if [ -s "$tmp/err" ]; then
		problem "${page##*/} does not render cleanly:"
		sed 's/^/    /' "$tmp/err"
	fi
done

if [ "$fail" = 0 ]; then
	echo "check_man: $(wc -l <"$tmp/api") public functions, $pages pages: all documented, listed and clean"
fi
exit "$fail"
