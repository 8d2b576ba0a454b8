#!/bin/bash
# Builds the VM image of test/vm from Debian packages only (see docs/vm.md).
# Usage: image.sh OUTDIR MIRROR
# Writes OUTDIR/disk.img (raw ext4, the root file system), OUTDIR/vmlinuz
# and OUTDIR/initrd.img. Run as root. The Go side (test/vm/image.go) calls
# it in a temporary directory under a lock and renames the result into the
# cache; the cache key is a hash of this file, so the package list lives here.
set -euo pipefail
out=$1
mirror=$2
suite=bookworm
# What a Kubernetes node and an ONTAP storage host run, plus the few tools
# the init script and the tests use.
packages=open-iscsi,multipath-tools,nfs-common,nfs-kernel-server,e2fsprogs,xfsprogs,udev,kmod,iproute2,util-linux,mount,procps
root=$out/root

cleanup() {
	umount "$root/proc" 2>/dev/null || true
	umount "$root/sys" 2>/dev/null || true
}
trap cleanup EXIT

debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror"

# Nothing may start services in the chroot.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
# A small initramfs: the VM's root is a virtio disk with ext4; the rest of
# the modules load from the root file system.
mkdir -p "$root/etc/initramfs-tools/conf.d"
echo MODULES=list >"$root/etc/initramfs-tools/conf.d/ontap-csi-vm.conf"
printf 'virtio_pci\nvirtio_blk\next4\n' >>"$root/etc/initramfs-tools/modules"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends linux-image-amd64
cleanup

cp "$root"/boot/vmlinuz-* "$out/vmlinuz"
cp "$root"/boot/initrd.img-* "$out/initrd.img"
# The image never needs apt again: drop what only apt and people read.
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root/boot"/*
rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
# Mount points of the host's shares, and init= of the VM: it mounts the
# "in" share and runs the harness's init script from it (test/vm/init.sh),
# so that changing that script needs no new image.
mkdir -p "$root/host/in" "$root/host/out"
cat >"$root/sbin/ontap-csi-vm-init" <<'INIT'
#!/bin/sh
PATH=/usr/sbin:/usr/bin:/sbin:/bin
modprobe 9pnet_virtio && modprobe 9p &&
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro in /host/in &&
	exec /bin/bash /host/in/init.sh
echo "ontap-csi-vm: cannot mount the host's share" >/dev/console
echo o >/proc/sysrq-trigger
sleep 60
INIT
chmod 755 "$root/sbin/ontap-csi-vm-init"
mkfs.ext4 -q -L ontap-csi-vm -d "$root" "$out/disk.img" 4G
rm -rf "$root"
