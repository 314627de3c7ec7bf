# Common definitions for scripts/*: the cache directory, the build root and a
# way to run commands inside it.  Source it; it defines functions only.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions.env
. "$REPO/scripts/versions.env"

# Everything built or downloaded lives here, never in the repository.
CACHE=${SOFTRNIC_CACHE:-/var/tmp/softrnic}
ROOT=$CACHE/root                       # the trixie build root (also the guest's /)
STAMPS=$CACHE/stamps
LOCK=$CACHE/versions.lock              # what scripts/setup chose and installed
KSRC_IN_ROOT=/usr/src/softrnic-linux   # Rust-capable kernel tree, inside ROOT
KDEBUG_IN_ROOT=/usr/src/softrnic-linux-debug  # the debug kernel tree (scripts/debug-kernel)
DEBUG_BUILD_IN_ROOT=/var/cache/softrnic-debug-build  # the module's sources, built for it
RDMA_SRC_IN_ROOT=/usr/src/softrnic-rdma-core
SRC_IN_ROOT=/src                       # where the repository appears in ROOT
TARGET_IN_ROOT=/var/cache/softrnic-target  # cargo target directory, inside ROOT

# The repository's version: VERSION, and the commit when git can tell
# (modinfo shows it; the build root has no git, so scripts/build passes it
# in).
repo_version() {
    local h
    h=$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null) || h=
    echo "$(cat "$REPO/VERSION")${h:++g$h}"
}

# Progress lines carry the time since the first script of this command began
# (make exports SOFTRNIC_T0 once for all of them).
: "${SOFTRNIC_T0:=$(date +%s)}"
export SOFTRNIC_T0
elapsed() { local s=$(( $(date +%s) - SOFTRNIC_T0 )); printf '%d:%02d' $((s / 60)) $((s % 60)); }
log() { printf '[softrnic %s] %s\n' "$(elapsed)" "$*" >&2; }
die() { printf '[softrnic %s] error: %s\n' "$(elapsed)" "$*" >&2; exit 1; }

# stamp_ok NAME KEY: true when step NAME already ran with the same KEY.
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { mkdir -p "$STAMPS"; printf '%s' "$2" > "$STAMPS/$1"; }

# lock_value KEY: what the lock file records for KEY ("KEY=value" lines).
lock_value() { [ -f "$LOCK" ] || return 0; sed -n "s/^$1=//p" "$LOCK" | head -n 1; }
# The kernel and toolchain of the build root, as scripts/setup recorded them:
# KVER (release), KPKG (its Debian version), KSOURCE (linux-source-X.Y),
# KCC (the C compiler it was built with), KLLVM (its rustc's LLVM major),
# PRIVATE_ABI (libibverbs's private provider ABI).
KVER=$(lock_value KVER) KPKG=$(lock_value KPKG) KSOURCE=$(lock_value KSOURCE)
KCC=$(lock_value KCC) KLLVM=$(lock_value KLLVM) PRIVATE_ABI=$(lock_value PRIVATE_ABI)
KHDR_IN_ROOT=/usr/src/linux-headers-$KVER
# need_root: stop unless scripts/setup has made the build root.
need_root() {
    [ -x "$ROOT/bin/sh" ] && [ -n "$KVER" ] || die "no build root in $CACHE yet: run scripts/setup (or make)"
}

# The Debian archive URIs this host's apt uses (never hard-coded): the main
# archive, and the security archive (empty if the host has none).
apt_uris() { # apt_uris main|security
    local sel=-v
    [ "$1" = security ] && sel=
    {
        # deb822 stanzas: one "URI suites" line per stanza.
        awk 'BEGIN { RS = ""; FS = "\n" }
             { u = ""; s = ""
               for (i = 1; i <= NF; i++) {
                 if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); u = a[2] }
                 if ($i ~ /^Suites:/) { s = $i; sub(/^Suites:[ \t]*/, "", s) } }
               if (u != "") print u, s }' /etc/apt/sources.list.d/*.sources 2>/dev/null
        # one-line format
        grep -hsE '^deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            sed -E 's/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//' | awk '{print $1, $2}' || true
    } | { grep $sel -- '-security' || true; } | awk '{print $1}' | head -n 1
}
# On a host whose apt is not Debian's (Ubuntu), SOFTRNIC_MIRROR names a Debian
# mirror (and SOFTRNIC_SECURITY_MIRROR its security archive, if any).
archive_uri() {
    local uri=${SOFTRNIC_MIRROR:-}
    if [ -z "$uri" ]; then
        grep -qsx 'ID=debian' /etc/os-release ||
            die "this host's apt archive is not Debian's: set SOFTRNIC_MIRROR to a Debian mirror's URL"
        uri=$(apt_uris main)
    fi
    [ -n "$uri" ] || die "no Debian archive URI found in the host's apt configuration (or SOFTRNIC_MIRROR)"
    printf '%s\n' "$uri"
}
security_uri() {
    if [ -n "${SOFTRNIC_MIRROR:-}" ]; then printf '%s\n' "${SOFTRNIC_SECURITY_MIRROR:-}"
    else apt_uris security; fi
}

# in_root CMD...: run CMD as root inside the build root, in a private mount
# namespace (the bind mounts vanish with it), with the repository at /src.
in_root() {
    [ -x "$ROOT/bin/sh" ] || die "no build root in $CACHE yet: run scripts/setup (or make)"
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
