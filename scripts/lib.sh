# Common definitions for scripts/*: the cache directory, the build root and a
# way to run commands inside it.  Source it; it defines functions only.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions.env
. "$REPO/scripts/versions.env"

# Everything built or downloaded lives here, never in the repository.
CACHE=${SOFTRNIC_CACHE:-/var/tmp/softrnic}
ROOT=$CACHE/root                       # the trixie build root (also the guest's /)
STAMPS=$CACHE/stamps
KSRC_IN_ROOT=/usr/src/softrnic-linux   # Rust-capable kernel tree, inside ROOT
KHDR_IN_ROOT=/usr/src/linux-headers-$KVER
KDEBUG_IN_ROOT=/usr/src/softrnic-linux-debug  # the debug kernel tree (scripts/debug-kernel)
DEBUG_BUILD_IN_ROOT=/var/cache/softrnic-debug-build  # the module's sources, built for it
RDMA_SRC_IN_ROOT=/usr/src/softrnic-rdma-core
SRC_IN_ROOT=/src                       # where the repository appears in ROOT
TARGET_IN_ROOT=/var/cache/softrnic-target  # cargo target directory, inside ROOT

log() { printf '[softrnic] %s\n' "$*" >&2; }
die() { printf '[softrnic] error: %s\n' "$*" >&2; exit 1; }

# stamp_ok NAME KEY: true when step NAME already ran with the same KEY.
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$STAMPS"; printf '%s' "$2" > "$STAMPS/$1"; }

# The Debian archive URI this host's apt uses (never hard-coded).
archive_uri() {
    local uri
    uri=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
          awk '{print $2}' | grep -v -- '-security' | head -n1)
    if [ -z "$uri" ]; then
        uri=$(grep -hsE '^deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
              sed -E 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' | awk '{print $1}' |
              grep -v -- '-security' | head -n1)
    fi
    [ -n "$uri" ] || die "no Debian archive URI found in the host's apt configuration"
    printf '%s\n' "$uri"
}

# in_root CMD...: run CMD as root inside the build root, in a private mount
# namespace (the bind mounts vanish with it), with the repository at /src.
in_root() {
    [ -x "$ROOT/bin/sh" ] || die "build root missing: run scripts/setup"
    unshare --mount --propagation private -- /bin/sh -c '
        set -e
        R=$1; S=$2; shift 2
        for m in proc sys dev dev/pts; do mount --bind /$m "$R/$m"; done
        mkdir -p "$R/src" && mount --bind "$S" "$R/src"
        [ -f /etc/resolv.conf ] && mount --bind /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
        exec chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LANG=C.UTF-8 TERM=dumb CARGO_HTTP_CAINFO=/etc/ssl/certs/host-ca.pem \
            CARGO_HOME=/var/cache/softrnic-cargo \
            CARGO_TARGET_DIR='"$TARGET_IN_ROOT"' RDMA_CORE_SRC='"$RDMA_SRC_IN_ROOT"' "$@"
    ' sh "$ROOT" "$REPO" "$@"
}

# cargo_in_root ARGS...: run cargo in the build root on the userspace workspace.
cargo_in_root() {
    in_root /bin/sh -c 'cd "$0" && exec cargo "$@"' "$SRC_IN_ROOT/userspace" "$@"
}
