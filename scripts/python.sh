#!/usr/bin/env bash
# The Python package on a fresh Debian 12 machine: install dependencies, build the module, and
# install it into a virtual environment at ./.venv (docs/python.md). The venv sees Debian's
# numpy (--system-site-packages); pip installs only opfuse, from the package CMake laid out in
# build/python, without an index (only Debian's package mirror is needed). Rerunning reuses the
# venv and reinstalls the package.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh opfuse_python
# The interpreter the module was built for (python/CMakeLists.txt: Debian's by default).
python="$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' build/CMakeCache.txt)"
if [[ -z $python || ! -f build/python/pyproject.toml ]]; then
  echo "python.sh: the Python package was not configured (see 'opfuse Python package' in the cmake output)" >&2
  exit 1
fi
if [[ ! -x .venv/bin/python ]]; then
  "$python" -m venv --system-site-packages .venv
fi
# A venv made from another interpreter cannot load this module: say so instead of failing later.
want="$("$python" -c 'import sys; print(sys.version_info[:2])')"
have="$(.venv/bin/python -c 'import sys; print(sys.version_info[:2])')"
if [[ $want != "$have" ]]; then
  echo "python.sh: .venv runs Python $have but the module is built for $want ($python); remove .venv and rerun" >&2
  exit 1
fi
.venv/bin/python -m pip install --quiet --no-build-isolation --no-deps --no-index --force-reinstall ./build/python
# pip builds in the source tree; what it leaves there is not part of the package layout.
rm -rf build/python/build build/python/opfuse.egg-info
# -I: neither the current directory nor PYTHONPATH, so this is the installed package.
.venv/bin/python -I -c 'import opfuse; print("opfuse", opfuse.__version__, "installed:", opfuse.__file__)'
echo "Activate it with:  source .venv/bin/activate"
echo "Then:              python -c 'import opfuse; print(opfuse.target_info()[\"description\"])'"
