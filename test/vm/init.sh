#!/bin/bash
# The VM's init (pid 1), run from the host's "in" share by the image's
# /sbin/ontap-csi-vm-init (test/vm/image.sh). No systemd: it starts what a
# Kubernetes node and an ONTAP storage host run, runs the harness's steps
# (/host/in/steps/NN-name/argv, NUL-separated, and env; shared environment
# in /host/in/env) one after the other, writes each one's output and exit
# code, and the first failure's code as the run's, to the "out" share and
# powers off. Markers on the console ("ontap-csi-vm: ...") let the host time
# the boot.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LC_ALL=C
say() { echo "ontap-csi-vm: $*" >/dev/console; }
fail() { say "init failed: $*"; echo 1 >/host/out/exit-code.tmp; mv /host/out/exit-code.tmp /host/out/init-failed; poweroff_now; }
poweroff_now() {
	sync
	echo o >/proc/sysrq-trigger
	sleep 60
}
say "init started"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out /host/out || poweroff_now
exec >/host/out/init.log 2>&1
PS4='+ ${EPOCHREALTIME} '
set -x
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/lock/iscsi /run/rpcbind /run/sendsigs.omit.d
mount -t tmpfs tmpfs /tmp
mount -t configfs configfs /sys/kernel/config 2>/dev/null || true
hostname ontap-csi-vm

mkdir -p /etc/target # LIO's db_root
# In one go: loading in parallel is slower under TCG.
modprobe -a configfs target_core_mod target_core_file iscsi_target_mod iscsi_tcp \
	dm_multipath dm_round_robin loop nfsd nfs nfsv3 nfsv4 || fail "modprobe"

# The simulator's data LIFs: NFS 127.0.0.10, iSCSI 127.0.0.11 and .12
# (.13 for a third node's LIF, test/e2e TestMultipathMapLateOrNever). The
# node's address is 127.0.0.20: connections to a LIF come from it (a local
# route's preferred source), as from a node to ONTAP, so that export policy
# rules see the node's address and not the LIF's own.
ip link set lo up
ip addr add 127.0.0.20/32 dev lo
for a in 127.0.0.10 127.0.0.11 127.0.0.12 127.0.0.13; do
	ip addr add "$a/32" dev lo
	ip route replace local "$a" dev lo src 127.0.0.20 table local
done

# nfs-common's 99-nfs.rules (Debian 12: nfs-utils 2.6.2) runs nfsrahead
# for every bdi that appears, to tune NFS read-ahead: for a SCSI disk or a
# dm map it parses /proc/self/mountinfo ten times before it gives up. With
# the node benchmark's 500 mounts that is 5-6 s of CPU per block device
# under TCG; at 20 LUNs at once (40 paths, 20 maps) udev's queue fell
# 90-150 s behind the kernel, multipathd (which acts on udev's events)
# built the maps that late, and the stages ran out of time
# (docs/benchmarks.md, issue 16). NFS mounts are on anonymous devices
# (major 0): only those need it, as a patch proposed to nfs-utils decides too.
mkdir -p /etc/udev/rules.d
cat >/etc/udev/rules.d/99-nfs.rules <<'RULE'
SUBSYSTEM=="bdi", ACTION=="add", KERNEL=="0:*", PROGRAM="/usr/libexec/nfsrahead %k", ATTR{read_ahead_kb}="%c"
RULE
/lib/systemd/systemd-udevd --daemon || fail "udevd"
mountpoint -q /sys/kernel/config || mount -t configfs configfs /sys/kernel/config || fail "configfs"
mount -t nfsd nfsd /proc/fs/nfsd || fail "nfsd fs"
# Only block devices exist before the tests make their own: a full
# coldplug costs 20 s here.
udevadm trigger --action=add --subsystem-match=block
udevadm settle -t 30

# The node: iscsid with a fixed initiator name, multipathd making a map for
# every path (find_multipaths no), maps named by WWID.
mkdir -p /etc/iscsi /var/lib/iscsi
echo "InitiatorName=${ONTAP_CSI_VM_IQN:-iqn.2005-03.org.open-iscsi:vm-node}" >/etc/iscsi/initiatorname.iscsi
iscsid || fail "iscsid"
cat >/etc/multipath.conf <<'MP'
defaults {
	user_friendly_names no
	find_multipaths no
	polling_interval 2
}
MP
# ONTAP_CSI_VM_TRACE=1 (in the shared environment, /host/in/env) keeps,
# per step, what the node's daemons did, with the time of each line: the
# log of multipathd in the foreground at -v3, udev's monitor (kernel
# uevents and udev's, to see a backlog), and every 5 s how long multipathd
# took to answer "show maps" and "show paths", what it answered, and the
# processes that use or wait for the CPUs.
if tr -s '\0' '\n' </host/in/env 2>/dev/null | grep -qx 'ONTAP_CSI_VM_TRACE=1'; then
	trace=/run/trace
	mkdir -p $trace
	set +x # not a line in init.log per line traced
	stamp() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done; }
	(multipathd -d -v3 2>&1 | stamp >>$trace/multipathd.log) &
	(udevadm monitor --kernel --udev 2>&1 | stamp >>$trace/udev.log) &
	(
		while sleep 5; do
			for c in "show maps" "show paths"; do
				s=$EPOCHREALTIME
				o=$(multipathd $c 2>&1)
				e=$EPOCHREALTIME
				echo "== $s multipathd $c took $(((${e/./} - ${s/./}) / 1000)) ms, load $(cut -d' ' -f1-3 /proc/loadavg)"
				echo "$o"
			done
			# Who has the CPUs: the busiest processes so far, the
			# runnable and blocked ones now, the kernel's CPU split.
			echo "== $EPOCHREALTIME ps"
			ps -eo pid,ppid,stat,time,etimes,args --sort=-time | head -25 | cut -c1-160
			ps -eo stat=,args= | awk '$1 ~ /^[RD]/' | cut -c1-120
			head -1 /proc/stat
			n=0 in_db=0
			for d in /sys/block/sd*; do
				[ -e "$d/dev" ] || continue
				n=$((n + 1))
				[ -e "/run/udev/data/b$(cat "$d/dev")" ] && in_db=$((in_db + 1))
			done
			echo "udev database: $in_db of $n SCSI disks"
		done >>$trace/samples.log 2>&1
	) &
	sleep 1
	set -x
else
	multipathd || fail "multipathd"
fi

# The storage host: rpcbind, statd (NFSv3 locks), mountd, nfsd. Short grace
# and lease times: NFSv4 opens wait out the grace period after nfsd starts.
rpcbind -w || fail "rpcbind"
rpc.statd || fail "rpc.statd"
mkdir -p /srv/ontap-sim/nfs /var/lib/nfs/v4recovery
printf '[exports]\nrootdir=/srv/ontap-sim/nfs\n' >/etc/nfs.conf.d/ontap-sim.conf
echo 10 >/proc/fs/nfsd/nfsv4gracetime
echo 10 >/proc/fs/nfsd/nfsv4leasetime
rpc.mountd || fail "rpc.mountd"
rpc.nfsd 4 || fail "rpc.nfsd"
exportfs -ra
set +x
say "ready"

# The binaries run from a copy in memory, put where they were: executed
# from the 9p share, each page comes through 9p (ontap-csi took 5-7 s to
# start under TCG, 0.3 s from tmpfs), and the tests start it often.
mkdir -p /run/host-in
mount -t tmpfs -o mode=0755 tmpfs /run/host-in
cp -a /host/in/. /run/host-in/ || fail "copy /host/in"
mount --bind /run/host-in /host/in
mount -o remount,bind,ro /host/in

# Global environment, then the steps (/host/in/steps/NN-name/{argv,env}),
# one after the other, each in /tmp with its own output directory
# /host/out/steps/NN-name ($ONTAP_CSI_VM_OUT): output.log, dmesg.log, and
# "result": exit code, start and end (seconds since the epoch).
if [ -s /host/in/env ]; then
	mapfile -d '' envs </host/in/env
	for kv in "${envs[@]}"; do export "$kv"; done
fi
# cpu_ticks prints the guest's CPU use so far, in clock ticks: busy (all
# CPUs), busy and idle, and what this init's reaped children used, which is
# a step's processes (the test binary, the plugins it started, mkfs...)
# apart from the daemons. A step's "cpu" file has it before and after, so
# the host can tell a step that waits from one the emulated CPUs hold up.
cpu_ticks() {
	local _ u n s i w q sq st rest
	read -r _ u n s i w q sq st rest </proc/stat
	local stat=$(</proc/$$/stat)
	local f=(${stat##*) })
	echo "$((u + n + s + q + sq + st)) $((u + n + s + q + sq + st + i + w)) $((f[13] + f[14]))"
}
cd /tmp
rc=0
for dir in /host/in/steps/*/; do
	name=$(basename "$dir")
	out=/host/out/steps/$name
	mkdir -p "$out"
	say "step $name"
	cpu0=$(cpu_ticks)
	start=$EPOCHREALTIME
	(
		export ONTAP_CSI_VM_OUT=$out
		if [ -s "$dir/env" ]; then
			mapfile -d '' envs <"$dir/env"
			for kv in "${envs[@]}"; do export "$kv"; done
		fi
		mapfile -d '' argv <"$dir/argv"
		exec "${argv[@]}"
	) >"$out/output.log" 2>&1 </dev/null
	step=$?
	echo "$step $start $EPOCHREALTIME" >"$out/result"
	echo "$cpu0 $(cpu_ticks)" >"$out/cpu"
	dmesg -c >"$out/dmesg.log" 2>&1
	if [ -n "${trace:-}" ]; then
		for f in $trace/*.log; do
			cp "$f" "$out/trace-$(basename "$f")" && : >"$f"
		done
	fi
	say "step $name exited $step"
	[ "$rc" -eq 0 ] && rc=$step
done
dmesg >/host/out/dmesg.log 2>&1
say "command exited $rc"
echo "$rc" >/host/out/exit-code.tmp
mv /host/out/exit-code.tmp /host/out/exit-code
poweroff_now
