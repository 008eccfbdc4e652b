#!/usr/bin/env python3
"""where.py CLI_JSON WINDOW_SECONDS SIDE < `perf script -F period,ip,sym`

Sorts the CPU samples of one process (cpu-clock, with call graphs) by kind of
work and by the code that did it, in µs per call: calls = the client's calls/s
(CLI_JSON) times the recording window."""
import collections, json, re, sys

res = json.load(open(sys.argv[1]))
calls = res["qps"] * float(sys.argv[2])
side = sys.argv[3]

# A collection's phase changes (stopping the world, forEachP's handshakes
# with every P, including their waits for a P to answer) are counted apart
# from marking, whoever runs them; marking is split by what it scans.
GC = [("runtime.stopTheWorldWithSema", "GC phase changes (stop the world, forEachP)"),
      ("runtime.forEachPInternal", "GC phase changes (stop the world, forEachP)"),
      ("runtime.gcStart", "GC start/stop"), ("runtime.gcMarkDone", "GC start/stop"),
      ("runtime.gcMarkTermination", "GC start/stop"),
      ("runtime.scanstack", "GC mark: goroutine stacks"),
      ("runtime.markrootBlock", "GC mark: globals"),
      ("runtime.gcBgMarkWorker", "GC mark (background worker)"),
      ("runtime.gcAssistAlloc", "GC mark assist (in allocation)"),
      ("runtime.bgsweep", "GC sweep"), ("runtime.bgscavenge", "scavenger"),
      # Allocation's slow paths: an object of a size class with one object
      # per span (16 KiB) takes a span from the heap on every allocation;
      # a sample of the memory profile (runtime.MemProfileRate) unwinds
      # the allocating stack.
      ("runtime.(*mcache).refill", "malloc: new span (mcache refill)"),
      ("runtime.profilealloc", "malloc: memory profile sample")]
SCHED = {"runtime.schedule", "runtime.findRunnable", "runtime.park_m", "runtime.gopark",
         "runtime.goready", "runtime.ready", "runtime.wakep", "runtime.netpoll", "runtime.stopm",
         "runtime.startm", "runtime.mcall", "runtime.goschedImpl", "runtime.sysmon",
         "runtime.notesleep", "runtime.notewakeup", "runtime.mPark", "runtime.exitsyscall",
         "runtime.entersyscall", "runtime.reentersyscall", "runtime.goexit0", "runtime.newproc"}

def kernel(f):
    return not ("." in f or "/" in f) or f.startswith("do_softirq.") or f.endswith(".isra.0") or f.endswith(".part.0") or f.endswith(".constprop.0")

def who(stack):
    for f in stack:
        m = re.match(r"github\.com/minidubbo/minidubbo/(.*)", f)
        if m:
            return m.group(1)
        if f.startswith("main."):
            return f
    for f in stack:
        if not kernel(f) and not f.startswith(("runtime.", "internal/", "syscall.", "sync.", "net.", "bufio.", "io.", "os.")):
            return f
    return "(runtime)"

def syscall(stack):
    for f in stack:
        if f in ("syscall.read", "syscall.readv") or f.endswith("(*FD).Read") or f.endswith("(*FD).RawRead"):
            return "read"
        if f in ("syscall.write", "syscall.writev") or f.endswith("(*FD).Write") or f.endswith("(*FD).Writev") or f.endswith("(*FD).RawWrite") or f == "internal/poll.writev":
            return "write"
        if f in ("runtime.futex",):
            return "futex"
        if f in ("runtime.netpoll", "runtime.epollwait", "internal/runtime/syscall/linux.EpollWait"):
            return "epoll_pwait"
        if f in ("runtime.usleep",):
            return "nanosleep (" + ("sysmon" if "runtime.sysmon" in stack else "spinning") + ")"
        if f in ("runtime.osyield",):
            return "sched_yield"
        if f in ("runtime.madvise", "runtime.sysUnusedOS", "runtime.sysUsedOS"):
            return "madvise"
    return None

def kind(stack):
    for g, name in GC:
        if g in stack:
            return name
    ks = [f for f in stack if kernel(f)]
    if ks:
        s = set(ks)
        if s & {"asm_exc_page_fault", "exc_page_fault"}:
            return "page faults"
        sc = syscall(stack)
        if sc == "read":
            if s & {"_copy_to_iter", "simple_copy_to_iter", "__skb_datagram_iter", "skb_copy_datagram_iter"}:
                return "read(): copy to user"
            return "read(): rest (tcp recv, entry/exit)"
        if sc == "write":
            if s & {"net_rx_action", "process_backlog"}:
                return "write(): loopback receive (softirq)"
            if s & {"_copy_from_iter", "skb_copy_to_page_nocache", "_copy_from_iter_full", "copy_page_from_iter"}:
                return "write(): copy from user"
            return "write(): rest (tcp send, entry/exit)"
        if sc:
            return sc
        if "do_syscall_64" in s:
            return "other syscalls"
        if s & {"net_rx_action", "process_backlog"}:
            return "softirq (network, outside syscalls)"
        return "kernel other (irq, preemption)"
    leaf = stack[0]
    if leaf == "runtime.memmove":
        return "memmove"
    if leaf in ("runtime.memclrNoHeapPointers", "runtime.memclrNoHeapPointersChunked"):
        return "memclr (zeroing fresh memory)"
    if leaf in ("memeqbody", "runtime.memequal", "bytes.Equal"):
        return "memequal (bytes.Equal)"
    if "runtime.mallocgc" in stack or "runtime.newobject" in stack or "runtime.growslice" in stack:
        return "malloc (rest)"
    if any(f in SCHED for f in stack):
        return "scheduler, hand-offs"
    if "runtime.morestack" in stack or "runtime.newstack" in stack:
        return "stack growth"
    if leaf.startswith("runtime.") or leaf.startswith("internal/runtime"):
        return "runtime other"
    return "code (user)"

kinds = collections.Counter(); whos = collections.Counter(); kw = collections.Counter()
total = 0
period = None; stack = []
def flush():
    global total
    if period is None:
        return
    st = stack or ["?"]
    k, w = kind(st), who(st)
    kinds[k] += period; whos[w if w.startswith(("main.", "(")) else w.split("(")[0].split(".")[0]] += period
    kw[(k, w)] += period; total += period

for line in sys.stdin:
    if not line.strip():
        continue
    if not line.startswith("\t") and not line.startswith(" " * 8 + "0") and re.match(r"^\s*\d+\s*$", line):
        flush(); period = int(line); stack = []
    else:
        parts = line.split(None, 1)
        if len(parts) == 2:
            stack.append(re.sub(r"(\+0x[0-9a-f]+|\.abi0)$", "", parts[1].strip()))
flush()
us = lambda v: v / 1e3 / calls
print(f'{res["system"]} {res["callers"]} callers @ {res["size"]} B: {res["qps"]:.0f} calls/s, other load {res["other_cpus"]:.2f} CPUs; cli {res["client_cpu_us_per_call"]:.1f} srv {res["server_cpu_us_per_call"]:.1f} µs/call (getrusage)')
print(f'== {side}: {us(total):.1f} µs/call sampled')
for k, v in kinds.most_common():
    tops = sorted(((vv, w) for (kk, w), vv in kw.items() if kk == k), reverse=True)[:3]
    print(f'  {us(v):5.2f}  {k:38s} ' + "; ".join(f'{w} {us(vv):.2f}' for vv, w in tops))
print(f'  -- by package (leafmost minidubbo/main frame)')
for w, v in whos.most_common(12):
    print(f'  {us(v):5.2f}  {w}')
if len(sys.argv) > 4:
    json.dump({"system": res["system"], "side": side, "qps": res["qps"], "other": res["other_cpus"],
               "total": us(total), "kinds": {k: us(v) for k, v in kinds.items()},
               "who": {w: us(v) for w, v in whos.items()},
               "kindwho": {f"{k} | {w}": us(v) for (k, w), v in kw.items()}}, open(sys.argv[4], "w"))
