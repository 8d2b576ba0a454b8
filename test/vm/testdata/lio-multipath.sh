#!/bin/bash
# A LUN made by hand in LIO (configfs), one target with two portals on the
# loopback, logged in through both: two SCSI disks with udev links, one
# dm-multipath map over them, a file system on the map. It checks the
# VM's daemons and the facts the kernel data plane of the simulator rests on
# (docs/vm.md): the serial on VPD page 0x80, NETAPP's vendor strings,
# LIO's WWID, a live grow of a fileio backstore, and the "-o new" record
# that iscsiadm lists with portal group 4294967295.
set -euxo pipefail
T=/sys/kernel/config/target
IQN=iqn.1992-08.com.netapp:sn.0123456789abcdef:vs.2
INI=$(sed -n 's/^InitiatorName=//p' /etc/iscsi/initiatorname.iscsi)
BS=$T/core/fileio_90/lun-a
fail() { echo "FAIL: $*"; exit 1; }

truncate -s 64M /tmp/lun0.img
mkdir -p $BS
echo "fd_dev_name=/tmp/lun0.img,fd_dev_size=$((64 << 20))" >$BS/control
echo 80AbCdEfGhIj >$BS/wwn/vpd_unit_serial
echo NETAPP >$BS/wwn/vendor_id
echo "LUN C-Mode" >$BS/wwn/product_id
echo 1 >$BS/enable
for g in 1 2; do
	tpg=$T/iscsi/$IQN/tpgt_$g
	mkdir -p $tpg/np/127.0.0.1$g:3260 $tpg/lun/lun_0 $tpg/acls/$INI/lun_5
	ln -s $BS $tpg/lun/lun_0/backstore
	ln -s $tpg/lun/lun_0 $tpg/acls/$INI/lun_5/lun
	echo 0 >$tpg/attrib/authentication
	echo 1 >$tpg/enable
done

iscsiadm -m discovery -t st -p 127.0.0.11 | grep -c "$IQN" | grep -qx 2 || fail "discovery"
# A record made without discovery has no portal group tag.
iscsiadm -m node -T $IQN -p 127.0.0.12:3260 -o delete
iscsiadm -m node -T $IQN -p 127.0.0.12:3260 -o new
iscsiadm -m node | grep -qx "127.0.0.12:3260,4294967295 $IQN" || fail "node record of -o new"
iscsiadm -m node -T $IQN --login
udevadm settle
[ "$(iscsiadm -m session | wc -l)" = 2 ] || fail "two sessions"
for p in 11 12; do
	test -L "/dev/disk/by-path/ip-127.0.0.$p:3260-iscsi-$IQN-lun-5" || fail "by-path link of portal $p"
done
for i in $(seq 150); do
	dm=$(ls /sys/block | grep '^dm-' | head -1 || true)
	[ -n "$dm" ] && [ "$(ls /sys/block/$dm/slaves | wc -l)" = 2 ] && break
	sleep 0.2
done
[ -n "$dm" ] || fail "no multipath map"
uuid=$(cat /sys/block/$dm/dm/uuid)
case $uuid in mpath-36001405*) ;; *) fail "map uuid $uuid, want LIO's mpath-36001405…" ;; esac
for s in $(ls /sys/block/$dm/slaves); do
	[ "$(tail -c +5 /sys/block/$s/device/vpd_pg80 | tr -d '\0')" = 80AbCdEfGhIj ] || fail "serial of $s"
	grep -q NETAPP /sys/block/$s/device/vendor || fail "vendor of $s"
	grep -q "LUN C-Mode" /sys/block/$s/device/model || fail "model of $s"
done
multipath -ll

# Grow: the file, then the backstore, then a rescan of each path and the map.
truncate -s 128M /tmp/lun0.img
echo "fd_dev_size=$((128 << 20))" >$BS/control
for s in $(ls /sys/block/$dm/slaves); do echo 1 >/sys/block/$s/device/rescan; done
multipathd resize map "$(cat /sys/block/$dm/dm/name)" | grep -qx ok
[ "$(cat /sys/block/$dm/size)" = $((128 << 11)) ] || fail "map size after grow: $(cat /sys/block/$dm/size)"

mkfs.ext4 -q /dev/$dm
mkdir -p /mnt/a
mount /dev/mapper/"$(cat /sys/block/$dm/dm/name)" /mnt/a
echo hello >/mnt/a/f
umount /mnt/a
multipath -f "$(cat /sys/block/$dm/dm/name)"
iscsiadm -m node -T $IQN --logout
iscsiadm -m node -T $IQN -o delete

# The suites that follow in the same boot must find LIO empty.
for g in 1 2; do
	tpg=$T/iscsi/$IQN/tpgt_$g
	echo 0 >$tpg/enable
	rm $tpg/acls/$INI/lun_5/lun
	rmdir $tpg/acls/$INI/lun_5 $tpg/acls/$INI
	rm $tpg/lun/lun_0/backstore
	rmdir $tpg/lun/lun_0 $tpg/np/127.0.0.1$g:3260 $tpg
done
rmdir $T/iscsi/$IQN $BS $T/core/fileio_90
rm -f /tmp/lun0.img
if ls $T/iscsi | grep -q '^iqn\.'; then fail "LIO targets left: $(ls $T/iscsi)"; fi
echo PASS
