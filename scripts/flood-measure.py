#!/usr/bin/python3
"""Measures issue 39's defects on a build: an elastic kolorun job
(kolo-elastic-worker) under floods of idle TCP connections from this host.

  scripts/flood-measure.py BIN_DIR [fds|backlog|recovery|ulimit]...

  fds       kolorun's open files (/proc/PID/fd) before and after 300 idle
            connections to its gRPC port, and 12 s later (after the
            handshake deadline).
  backlog   300 idle connections to worker w0's data port between epochs:
            how many connects the worker's side completed (the rest wait in
            SYN retransmission behind a full backlog).
  recovery  the same flood to w0's and w1's data ports, then w2 SIGKILLed:
            seconds from the kill to the survivors' next completed step
            (EL_KILL -> EL_RECOVERED), over 3 jobs.
  ulimit    kolorun under `ulimit -n 1024`, 1,100 idle connections to its
            gRPC port, then w2 killed: the job's exit status (the
            replacement must start).
The ports are found as an attacker on the host would: the workers'
KOLO_COORDINATOR and listening sockets, from /proc. Every wait is bounded.
"""
import os
import re
import socket
import subprocess
import sys
import threading
import time


def children(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def env_of(pid, name):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for kv in f.read().split(b"\0"):
                if kv.startswith(name.encode() + b"="):
                    return kv.split(b"=", 1)[1].decode()
    except OSError:
        pass
    return ""


def listening_ports(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                t = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            m = re.match(r"socket:\[(\d+)\]", t)
            if m:
                inodes.add(m.group(1))
    except OSError:
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                for line in f.readlines()[1:]:
                    f_ = line.split()
                    if f_[3] == "0A" and f_[9] in inodes:
                        ports.add(int(f_[1].split(":")[1], 16))
        except OSError:
            pass
    return ports


def open_files(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class Job:
    def __init__(self, bindir, np, worker_args, ulimit=None):
        cmd = [f"{bindir}/kolorun", "-np", str(np), "--min-np", "2",
               f"{bindir}/kolo-elastic-worker"] + worker_args
        if ulimit:
            cmd = ["/bin/sh", "-c", f'ulimit -n {ulimit} && exec "$@"',
                   "sh"] + cmd
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line)

    def wait_for(self, needle, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if any(needle in l for l in self.lines):
                return True
            time.sleep(0.02)
        return False

    def ports(self):
        coord, data = 0, {}
        for p in children(self.p.pid):
            wid = env_of(p, "KOLO_WORKER_ID")
            lp = listening_ports(p)
            if wid and len(lp) == 1:
                data[wid] = lp.pop()
                coord = int(env_of(p, "KOLO_COORDINATOR").rsplit(":", 1)[1])
        return coord, data

    def finish(self, timeout=120):
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return "hung"

    def field(self, tag, key):
        for l in self.lines:
            if tag in l:
                m = re.search(rf"\b{key}=(\d+)", l[l.index(tag):])
                if m:
                    return int(m.group(1))
        return None


def flood(port, n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        socks.append(s)
    return socks


def answered(socks):
    import select
    n = 0
    for s in socks:
        _, w, _ = select.select([], [s], [], 0)
        if w and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
            n += 1
    return n


def started(job, np):
    return all(job.wait_for(f"EL_START worker=w{r}", 60) for r in range(np))


def measure_fds(bindir):
    job = Job(bindir, 2, ["--seconds", "16", "--steps", "100000",
                          "--step-ms", "50"])
    assert started(job, 2), "".join(job.lines)
    coord, _ = job.ports()
    before = open_files(job.p.pid)
    socks = flood(coord, 300)
    time.sleep(1.5)
    flooded = open_files(job.p.pid)
    time.sleep(11)
    later = open_files(job.p.pid)
    refusals = sum("gRPC port" in l for l in job.lines)
    print(f"fds: kolorun open files {before} -> {flooded} with 300 idle "
          f"connections -> {later} 12.5 s later; refusal lines: {refusals}; "
          f"exit {job.finish()}")
    del socks


def measure_backlog(bindir):
    job = Job(bindir, 2, ["--seconds", "6", "--steps", "100000",
                          "--step-ms", "50"])
    assert started(job, 2), "".join(job.lines)
    _, data = job.ports()
    socks = flood(data["w0"], 300)
    time.sleep(2)
    print(f"backlog: 300 idle connections to w0's data port between epochs: "
          f"{answered(socks)} completed; exit {job.finish()}")
    del socks


def measure_recovery(bindir, runs=3):
    times = []
    for _ in range(runs):
        job = Job(bindir, 3, ["--steps", "100000", "--seconds", "6",
                              "--step-ms", "50", "--replacement-exits", "1",
                              "--kill-after-ms", "2:1:3000"])
        assert started(job, 3), "".join(job.lines)
        _, data = job.ports()
        socks = flood(data["w0"], 300) + flood(data["w1"], 300)
        code = job.finish()
        kill, back = job.field("EL_KILL", "t"), job.field("EL_RECOVERED", "t")
        times.append((back - kill) / 1e6 if kill and back else None)
        print(f"recovery: exit {code}, kill -> recovered "
              f"{times[-1] if times[-1] is None else round(times[-1], 3)} s")
        if code != 0:
            print("".join(job.lines[-15:]))
        del socks


def measure_ulimit(bindir):
    job = Job(bindir, 3, ["--steps", "100000", "--seconds", "10",
                          "--step-ms", "50", "--kill-after-ms", "2:1:3000"],
              ulimit=1024)
    assert started(job, 3), "".join(job.lines)
    coord, _ = job.ports()
    socks = flood(coord, 1100)
    time.sleep(1)
    fds = open_files(job.p.pid)
    code = job.finish()
    emfile = [l.strip() for l in job.lines if "Too many open files" in l]
    print(f"ulimit: kolorun open files with 1,100 idle connections: {fds}; "
          f"job exit {code}; replacement started: "
          f"{any('incarnation=1' in l for l in job.lines)}; "
          f"EMFILE lines: {len(emfile)} {emfile[:1]}")
    del socks


def main():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    bindir = sys.argv[1]
    what = sys.argv[2:] or ["fds", "backlog", "recovery", "ulimit"]
    for w in what:
        globals()[f"measure_{w}"](bindir)


if __name__ == "__main__":
    main()
