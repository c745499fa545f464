#!/usr/bin/env bash
# Prepares what tests/softroce/qemu-run.sh boots: Debian's own kernel (the version that
# linux-image-amd64 depends on now, resolved, not hard-coded) and a busybox initramfs holding
# the modules soft-RoCE and the 9p root need, in the order modprobe's dependency data gives.
# Usage: guest-image.sh OUT_DIR    (reuses OUT_DIR when it already holds the current kernel)
set -euo pipefail
out=${1:?usage: guest-image.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

resolve() {
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'
}
package=$(resolve)
if [[ -z "$package" ]]; then
  apt-get update -qq >/dev/null 2>&1 || true  # a fresh machine may have no package lists
  package=$(resolve)
fi
if [[ -z "$package" ]]; then
  echo "guest-image.sh: cannot resolve the kernel package: 'apt-cache depends linux-image-amd64'" \
    "names no linux-image-<version> package (run apt-get update?)" >&2
  exit 1
fi
version=${package#linux-image-}
here=$(cd "$(dirname "$0")" && pwd)
# The image is rebuilt when the kernel or these scripts change.
stamp=$(cat "$here/guest-image.sh" "$here/guest-init.sh" | sha1sum | cut -c1-12)
if [[ -f "$out/$version.$stamp.ready" ]]; then
  echo "$out/$version"
  exit 0
fi

echo "guest-image.sh: fetching $package" >&2
rm -rf "$out/download" "$out/$version"
mkdir -p "$out/download" "$out/$version"
(cd "$out/download" && apt-get download "$package" >/dev/null 2>&1) || {
  echo "guest-image.sh: 'apt-get download $package' failed" >&2
  exit 1
}
dpkg -x "$out"/download/*.deb "$out/$version/root"
rm -rf "$out/download"
depmod -b "$out/$version/root" "$version"

# The modules, dependencies first: 9p over virtio for the root, overlay for a writable /tmp,
# rxe (with the crc32 shash it needs but does not declare) for the device, veth for
# namespace tests.
modules=(9p 9pnet_virtio virtio_pci overlay crc32_generic rdma_rxe veth)
initramfs="$out/$version/initramfs"
mkdir -p "$initramfs"/{bin,dev,proc,sys,host,modules}
: >"$initramfs/modules/order"
for module in "${modules[@]}"; do
  modprobe -d "$out/$version/root" -S "$version" --show-depends "$module" | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' | while read -r path; do
  cp "$path" "$initramfs/modules/"
  basename "$path" >>"$initramfs/modules/order"
done
cp /bin/busybox "$initramfs/bin/busybox"
cp "$here/guest-init.sh" "$initramfs/init"
chmod +x "$initramfs/init"
(cd "$initramfs" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/$version/initramfs.gz"
cp "$out/$version/root/boot/vmlinuz-$version" "$out/$version/vmlinuz"
rm -f "$out/$version".*.ready
touch "$out/$version.$stamp.ready"
echo "$out/$version"
