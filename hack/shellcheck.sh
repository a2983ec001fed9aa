#!/usr/bin/env bash
# Runs shellcheck on every shell script under hack/ and the files they source (`make lint`). Installs
# Debian's shellcheck first if it is missing, the way `hack/local-cluster.sh deps` installs packages.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v shellcheck >/dev/null 2>&1; then
  # shellcheck source=SCRIPTDIR/lib/common.sh
  . "$HERE/lib/common.sh"
  # shellcheck source=SCRIPTDIR/lib/build.sh
  . "$HERE/lib/build.sh"
  apt_install shellcheck
fi
cd "$HERE/.."
shellcheck -x hack/*.sh hack/lib/*.sh hack/upstream/*.sh
