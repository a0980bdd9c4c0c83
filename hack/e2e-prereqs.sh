#!/usr/bin/env bash
# Installs, with apt-get and only when missing, the Debian packages the e2e node runs on:
# containerd (containerd, ctr, the runc v2 shim), runc, the CNI plugins (/usr/lib/cni), iptables
# (kube-proxy's and the CNI plugins' rules, inside the private netns only), conntrack, and the
# util-linux/iproute2 tools the wrapper uses (unshare, nsenter, ip); and for the real guests of
# make e2e-workload, cloud-init, ifupdown, isc-dhcp-client and dnsmasq-base.
#
# No service is started: containerd's package would start a host containerd under systemd;
# a policy-rc.d that refuses every start is put in place for the install when there is none.
# Needs root. Quiet and instant when everything is there.
set -euo pipefail

log() { echo "e2e-prereqs: $*" >&2; }

if [[ "$(id -u)" != 0 ]]; then
  log "needs root (apt-get install, and later Linux namespaces with unshare); run: sudo $0"
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  log "needs a Debian-like system with apt-get; install by hand: containerd runc containernetworking-plugins iptables conntrack iproute2 util-linux"
  exit 1
fi

# package -> a file it installs
declare -A want=(
  [containerd]=/usr/bin/containerd
  [runc]=/usr/sbin/runc
  [containernetworking-plugins]=/usr/lib/cni/bridge
  [iptables]=/usr/sbin/iptables
  [conntrack]=/usr/sbin/conntrack
  [iproute2]=/usr/sbin/ip
  [util-linux]=/usr/bin/unshare
  # The real guests of make e2e-workload (test/guest): their template runs Debian's cloud-init
  # and ifupdown (with isc-dhcp-client); the lab's DHCP and DNS server is dnsmasq.
  [cloud-init]=/usr/bin/cloud-init
  [ifupdown]=/usr/sbin/ifup
  [isc-dhcp-client]=/usr/sbin/dhclient
  [dnsmasq-base]=/usr/sbin/dnsmasq
)
missing=()
for p in "${!want[@]}"; do
  [[ -e "${want[${p}]}" ]] || missing+=("${p}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

log "installing ${missing[*]}"
policy=/usr/sbin/policy-rc.d
made_policy=""
if [[ ! -e "${policy}" ]]; then
  printf '#!/bin/sh\n# Written by CAPOV hack/e2e-prereqs.sh for one apt-get run: start no service.\nexit 101\n' >"${policy}"
  chmod +x "${policy}"
  made_policy=1
fi
cleanup() { if [[ -n "${made_policy}" ]]; then rm -f "${policy}"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o DPkg::Lock::Timeout=300 -y -q --no-install-recommends)
apt-get -o DPkg::Lock::Timeout=300 -q update >&2
apt-get "${apt_opts[@]}" install "${missing[@]}" >&2
for p in "${missing[@]}"; do
  [[ -e "${want[${p}]}" ]] || { log "${p} installed but ${want[${p}]} is still missing"; exit 1; }
done
log "done"
