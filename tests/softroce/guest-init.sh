#!/bin/busybox sh
# PID 1 of the soft-RoCE guest: loads the modules, mounts the host's / (read-only 9p) and
# the writable results export, chroots into the host's tree and runs the command the host
# left in the results directory. Its exit code goes to results/exit-code; then power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for module in $(cat /modules/order); do
  insmod "/modules/$module" || echo "guest: insmod $module failed"
done
results=$(sed -n 's/.*symmesh.results=\([^ ]*\).*/\1/p' /proc/cmdline)
mount -t 9p -o trans=virtio,version=9p2000.L,ro hostroot /host
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
ln -s /proc/self/fd /host/dev/fd  # what udev would make: bash's <(...) needs it
# /tmp writable, yet still showing the host's (a checkout or build under /tmp must work).
mkdir -p /upper && mount -t tmpfs upper /upper && mkdir -p /upper/tmp /upper/work
mount -t overlay overlay -o lowerdir=/host/tmp,upperdir=/upper/tmp,workdir=/upper/work /host/tmp ||
  mount -t tmpfs tmp /host/tmp
mount -t tmpfs run /host/run
mkdir -p /host/dev/shm && mount -t tmpfs shm /host/dev/shm
# After the tmpfs mounts, so a results directory under /tmp is not hidden by them.
mkdir -p "/host$results" 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L results "/host$results"
chroot /host /bin/bash "$results/command.sh" >"/host$results/output.log" 2>&1
echo $? >"/host$results/exit-code"
dmesg | tail -n 60 >"/host$results/kernel.log"
sync
poweroff -f
