#!/bin/sh
# `cmake --install` into a temporary prefix, then a program built against it with nothing but
# `pkg-config --cflags --libs tightfit` (consumer.c: a model from the public layer helpers,
# compiled and trained three steps); also checks that the library exports only tf_ symbols.
# usage: test_install.sh BUILD-DIR SOURCE-DIR
build=$1 source=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$build" --prefix "$dir/prefix" > "$dir/install.log" 2>&1 || { cat "$dir/install.log"; fail "cmake --install"; }
echo "ok: installed into a temporary prefix ($(grep -c Installing "$dir/install.log") files)"
pc=$(find "$dir/prefix" -name tightfit.pc)
[ -n "$pc" ] || fail "no tightfit.pc installed"
export PKG_CONFIG_PATH="$(dirname "$pc")"
flags=$(pkg-config --cflags --libs tightfit) || fail "pkg-config --cflags --libs tightfit"
echo "ok: pkg-config --cflags --libs tightfit: $flags"
case "$flags" in *"$dir/prefix"*) ;; *) fail "the flags do not point into the prefix" ;; esac
for header in status types graph plan_types plan target compiler runtime feed layers zoo cli core/op_table; do
  [ -f "$dir/prefix/include/tightfit/$header.h" ] || fail "header tightfit/$header.h not installed"
done
echo "ok: public headers installed"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror -o "$dir/consumer" "$source/tests/install/consumer.c" $flags -lm ||
  fail "compiling consumer.c against the installed headers and library"
echo "ok: consumer.c compiled and linked with the pkg-config flags only"
libdir=$(pkg-config --variable=libdir tightfit)
LD_LIBRARY_PATH="$libdir" ldd "$dir/consumer" | grep -q "$dir/prefix.*libtightfit.so" || fail "consumer does not use the installed libtightfit.so"
LD_LIBRARY_PATH="$libdir" "$dir/consumer" || fail "consumer exited $?"
[ -x "$dir/prefix/bin/tightfit" ] && "$dir/prefix/bin/tightfit" --version > /dev/null || fail "the installed CLI does not run"
echo "ok: the installed tightfit CLI runs"
# A build with CUDA installs the backend's module beside the library, and the installed CLI loads
# that one (the dynamic loader's log), not the build tree's.
if [ -f "$build/libtightfit_cuda.so" ]; then
  [ -f "$libdir/libtightfit_cuda.so" ] || fail "the CUDA module is not installed in $libdir"
  LD_DEBUG=files "$dir/prefix/bin/tightfit" devices > "$dir/devices" 2> "$dir/ld" || fail "the installed devices"
  grep -q "file=$dir/prefix/.*libtightfit_cuda.so" "$dir/ld" || fail "the installed CLI did not load the installed module"
  grep -q "file=$build/libtightfit_cuda.so" "$dir/ld" && fail "the installed CLI loaded the build tree's module"
  grep -q '^cuda' "$dir/devices" || fail "no cuda line in the installed CLI's devices"
  echo "ok: the installed CLI loads the installed CUDA module: $(grep '^cuda' "$dir/devices" | cut -c1-60)"
fi
# The installed Python package finds the installed library by itself (no TIGHTFIT_LIBRARY).
PYTHONPATH="$dir/prefix/lib/python3/dist-packages" TIGHTFIT_LIBRARY= /usr/bin/python3 -c "
import tightfit, sys
path = tightfit.library_path()
assert path.startswith('$dir/prefix'), path
result = tightfit.check(tightfit.zoo('mlp'), budget='1MiB', target='cpu', set={'N': 32})
assert result['fits'] and result['categories']['total'] == 324096, result  # the default plan: updates in the backward pass
print('ok: the installed Python package loads', path.replace('$dir', 'PREFIX-PARENT'), 'and checks mlp')
" || fail "the installed Python package"
# Exactly the public API is exported: every exported symbol is declared in an installed header.
nm -D --defined-only "$libdir/libtightfit.so" | awk '{print $3}' | sort > "$dir/exported"
cat "$dir/prefix/include/tightfit/"*.h | grep -o 'tf_[a-z0-9_]*' | sort -u > "$dir/declared"
others=$(comm -23 "$dir/exported" "$dir/declared" | head -5)
[ -z "$others" ] || fail "libtightfit.so exports symbols no public header declares: $others"
for needed in tf_compile tf_session_create tf_layers_linear tf_feed_open tf_cli_run_captured; do
  grep -qx "$needed" "$dir/exported" || fail "libtightfit.so does not export $needed"
done
echo "ok: libtightfit.so exports $(wc -l < "$dir/exported") symbols, each declared in a public header"
echo "install: all passed"
