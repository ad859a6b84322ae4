"""CPU by group of the three daemons that run.sh profiled, in ms, and over NOSEC's.

python3 tools/security-profile/groups.py /tmp/prof/run1 [hz]
"""
import collections
import subprocess
import sys

DAEMONS = ("nosec", "control", "cmdrsp")


def samples(path):
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "--stdio", "--sort", "dso,sym", "-F", "sample,dso,sym"],
                         capture_output=True, text=True, check=True).stdout
    counts = collections.Counter()
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0].isdigit():
            counts[parts[2].strip()] += int(parts[0])
    return counts


def group(symbol):
    lower = symbol.lower()
    if "sha256_block" in symbol:
        return "SHA-256 block function"
    if "ring::" in symbol:
        return "ring glue (HMAC/digest contexts)"
    if "tessera_security" in symbol or "security_gate" in symbol:
        return "security checks, seal"
    if symbol.startswith("[k]"):
        return "kernel"
    if any(s in lower for s in ("sqlite", "rusqlite", "wal", "btree", "pcache", "pager")):
        return "SQLite"
    if any(s in symbol for s in ("memmove", "memcpy", "memset")):
        return "memcpy/memset"
    if any(s in symbol for s in ("malloc", "free", "_int_")):
        return "malloc/free"
    return "other user"


def main():
    base = sys.argv[1]
    hz = float(sys.argv[2]) if len(sys.argv) > 2 else 2999.0
    groups = {d: collections.Counter() for d in DAEMONS}
    for d in DAEMONS:
        for symbol, n in samples(f"{base}.{d}.data").items():
            groups[d][group(symbol)] += n
    names = sorted(set().union(*groups.values()), key=lambda g: -(groups["cmdrsp"][g] - groups["nosec"][g]))
    print("%-34s %8s %8s %8s %10s %10s" % ("group (ms)", "NOSEC", "control", "CMDRSP", "control-N", "CMDRSP-N"))
    for name in names + ["TOTAL"]:
        ms = {d: (sum(groups[d].values()) if name == "TOTAL" else groups[d][name]) * 1000 / hz for d in DAEMONS}
        print("%-34s %8.0f %8.0f %8.0f %+10.0f %+10.0f" % (name, ms["nosec"], ms["control"], ms["cmdrsp"],
                                                          ms["control"] - ms["nosec"], ms["cmdrsp"] - ms["nosec"]))


if __name__ == "__main__":
    main()
