#!/usr/bin/env bash
# The tools archbench.execute.imagebuild and the charliecloud runtime need, on a Debian host.
#
#   scripts/image_tools.sh install   install (as root, with apt-get) what is missing and
#                                    register qemu's binfmt_misc entries; then `check`
#   scripts/image_tools.sh check     exit 0 when everything is there, else name what is not
#
# debootstrap (root filesystems), qemu-user-static + binfmt-support (foreign-architecture
# binaries under emulation), squashfs-tools (mksquashfs), charliecloud-runtime (ch-run).
# A site that pulls docker:// images with charliecloud also needs charliecloud-builders
# (ch-image, ch-convert), which the tests do not use.
set -euo pipefail

PACKAGES=(debootstrap qemu-user-static binfmt-support squashfs-tools charliecloud-runtime)
COMMANDS=(debootstrap mksquashfs unshare chroot ch-run qemu-aarch64-static qemu-ppc64le-static)
BINFMT=/proc/sys/fs/binfmt_misc

log() { echo "image_tools: $*" >&2; }

missing() {
    local c
    for c in "${COMMANDS[@]}"; do
        command -v "$c" >/dev/null 2>&1 || echo "command $c"
    done
    for c in aarch64 ppc64le; do
        grep -qs '^enabled' "$BINFMT/qemu-$c" || echo "binfmt_misc entry qemu-$c"
    done
}

check() {
    local gaps
    gaps=$(missing)
    if [ -n "$gaps" ]; then
        log "missing: $(echo "$gaps" | paste -sd, -)"
        return 1
    fi
}

install() {
    if [ -z "$(missing)" ]; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        log "not root: cannot install ${PACKAGES[*]}"
        check
        return 1
    fi
    local absent=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || absent+=("$p")
    done
    if [ ${#absent[@]} -gt 0 ]; then
        log "installing ${absent[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${absent[@]}" >/dev/null ||
            { apt-get -o DPkg::Lock::Timeout=300 update >/dev/null &&
              apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${absent[@]}" >/dev/null; }
    fi
    # Without systemd nobody mounts binfmt_misc; the entries register once it is there.
    if [ ! -e "$BINFMT/register" ]; then
        mount -t binfmt_misc binfmt_misc "$BINFMT"
    fi
    update-binfmts --enable >/dev/null 2>&1 || true
    check
}

case "${1:-}" in
    install) install ;;
    check) check ;;
    *) echo "usage: $0 install|check" >&2; exit 2 ;;
esac
