#!/usr/bin/env bash
# Installs the Python package for Debian's python3 (what `make install` runs
# after `cmake --install`): python/lacuna/*.py into the site folder of the
# prefix, with a relative link lacuna/liblacuna.so to the library installed
# under the same prefix, so the installed package finds its own library.
# Usage: python/install.sh PREFIX   (DESTDIR is honoured; PYTHON_SITEDIR
# overrides the folder)
#   PREFIX=/usr        -> /usr/lib/python3/dist-packages
#   anything else      -> PREFIX/lib/python3.X/dist-packages (X: /usr/bin/python3's),
#                         on Debian's path for /usr/local
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
prefix=${1:?usage: python/install.sh PREFIX}
dest=${DESTDIR:-}
if [ -n "${PYTHON_SITEDIR:-}" ]; then
    site=$dest$PYTHON_SITEDIR
elif [ "$prefix" = /usr ]; then
    site=$dest/usr/lib/python3/dist-packages
else
    ver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    site=$dest$prefix/lib/python$ver/dist-packages
fi
lib=""
for name in liblacuna.so.0 liblacuna.so; do   # the runtime soname first
    [ -z "$lib" ] && lib=$(find "$dest$prefix" -maxdepth 3 -name "$name" 2>/dev/null | sort | head -1)
done
if [ -z "$lib" ]; then
    echo "python/install.sh: no liblacuna.so under $dest$prefix: install the library first (cmake --install)" >&2
    exit 1
fi
install -d "$site/lacuna"
install -m 644 "$here"/lacuna/*.py "$site/lacuna/"
ln -sfn "$(realpath -s --relative-to="$site/lacuna" "$lib")" "$site/lacuna/liblacuna.so"
echo "installed the Python package lacuna in $site"
case ":$(/usr/bin/python3 -c 'import sys; print(":".join(sys.path))'):" in
    *":${site#$dest}:"*) ;;
    *) [ -z "$dest" ] && echo "note: $site is not on /usr/bin/python3's path: add it to PYTHONPATH" ;;
esac
exit 0
