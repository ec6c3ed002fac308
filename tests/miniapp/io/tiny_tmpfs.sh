# Sourced by the full-disk checks: mounts a 64 KiB tmpfs at $1/fs and sets fs to it, unmounted when
# the script exits; without root or mount the script exits 77 (ctest: skipped).
mount_tiny_tmpfs() {
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to mount a tmpfs"; exit 77; }
  mkdir -p "$1/fs"
  mountpoint -q "$1/fs" && umount "$1/fs"
  mount -t tmpfs -o size=64k tmpfs "$1/fs" 2>/dev/null || { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
  trap "umount '$1/fs' 2>/dev/null" EXIT
  fs=$1/fs
}
