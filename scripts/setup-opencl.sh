#!/usr/bin/env bash
# Makes sure an OpenCL runtime is present: Debian's PoCL (a real OpenCL CPU device) and the
# oclgrind simulator that the tests use. The PyPI build of PoCL fails on some CPUs with
# "unknown target CPU 'generic'", so the Debian package is the one we install.
set -u
have_icd() { ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; }
want="pocl-opencl-icd oclgrind"
missing=""
have_icd || missing="pocl-opencl-icd"
command -v oclgrind >/dev/null 2>&1 || missing="$missing oclgrind"
[ -z "$missing" ] && exit 0
if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
    fi
    if [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; then
        echo "setup-opencl: installing$missing with apt-get"
        $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null \
            && exit 0
        echo "setup-opencl: apt-get install failed" >&2
    fi
fi
if have_icd; then
    echo "setup-opencl: oclgrind is missing; its tests will be skipped (install: apt-get install oclgrind)" >&2
    exit 0
fi
cat >&2 <<MSG
setup-opencl: no OpenCL runtime found and I cannot install one here.
Install one, then run make again. On Debian/Ubuntu, as root:
    apt-get update && apt-get install -y $want
Elsewhere: any OpenCL ICD (a GPU driver, or PoCL for the CPU) visible in /etc/OpenCL/vendors.
MSG
exit 1
