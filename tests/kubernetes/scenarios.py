#!/usr/bin/python3
"""The Kubernetes scenarios of issue 37, run by tests/kubernetes/harness.py.

  scenarios.py [--scenario ci|coordinator|delete|kill|scale|all] [--steps N]

Each scenario applies deploy/kubernetes/elastic-job.yaml (the worker's
--steps replaced by N so a run stays short), does its faults, and checks
that every worker left at the end prints EL_FINAL with the fingerprint of an
unfaulted run (kolo-elastic-train alone, same flags), that a deleted pod's
worker left on SIGTERM within its grace period (exit 0), and that the
coordinator ended the job with status 0.
  ci      the coordinator's container killed (the kubelet restarts it and
          every worker reconnects), one pod deleted, one container killed,
          scale 4 -> 6 -> 3 (ctest; with KOLO_LONG_TESTS=1 the four below as
          well)
  coordinator  the coordinator's container killed and restarted
  delete  a pod deleted; kill: a container killed; scale: 4 -> 6 -> 3
Exit 77 (skip) when not root or network namespaces can't be made.
Environment: KOLO_BIN_DIR (the build's bin/), KOLO_TIMEOUT_SCALE.
Single-threaded; the harness's cleanup runs on every exit.
"""

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(REPO, "deploy/kubernetes/elastic-job.yaml")
SCALE = float(os.environ.get("KOLO_TIMEOUT_SCALE", "1"))
T = 60 * SCALE  # the bound of each wait
NO_SETTLE = False  # --no-settle: the next fault right after a join


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def worker_args(cluster, steps):
    for s in cluster.find("StatefulSet"):
        c = s["spec"]["template"]["spec"]["containers"][0]
        args = c["args"]
        args[args.index("--steps") + 1] = str(steps)
        return args[:]


def reference(bin_dir, args):
    """The fingerprint of an unfaulted, single-process run."""
    args = [a for a in args]
    i = args.index("--step-ms")
    del args[i:i + 2]
    out = subprocess.run([os.path.join(bin_dir, "kolo-elastic-train")] + args,
                         env={"PATH": "/usr/bin:/bin"}, capture_output=True,
                         text=True, check=True).stdout
    return re.search(r"EL_FINAL .*fingerprint=(\w+)", out).group(1)


def step(cluster):
    steps = [int(m) for p in cluster.pods.values()
             for m in re.findall(r"EL_STEP step=(\d+)", p.logs())]
    return max(steps, default=0)


def joins(cluster, name):
    """How often the coordinator has admitted worker `name` as a newcomer."""
    log = coordinator(cluster).current().log()
    return sum(name in m.split(", ")
               for m in re.findall(r"formed with .*joined: ([^)]*)\)", log))


def workers(cluster):
    return [p for p in cluster.pods.values() if p.owner == "kolo-worker"]


def coordinator(cluster):
    return [p for p in cluster.pods.values() if p.owner == "kolo-coordinator"][0]


def settle(cluster):
    """Waits until training is past the last change (two EL_STEP lines on),
    unless --no-settle (the faults back to back)."""
    if NO_SETTLE:
        return
    s = step(cluster)
    cluster.wait("training went on past step %d" % (s + 50),
                 lambda: step(cluster) > s + 50, T)


def delete_one(cluster, name, leavers):
    pod = cluster.pods[name]
    leavers.append(pod)
    n = joins(cluster, name)
    cluster.delete_pod(name)
    cluster.wait(name + " left and was made again",
                 lambda: name in cluster.pods and cluster.pods[name] is not pod, T)
    cluster.wait(name + " (new pod) joined", lambda: joins(cluster, name) > n, T)
    settle(cluster)


def restart_coordinator(cluster):
    """The coordinator's container killed: the kubelet restarts it (1 s) and
    every worker reconnects within its lease, from its last commit."""
    pod = coordinator(cluster)
    cluster.kill_container(pod.name)
    cluster.wait("the coordinator restarted",
                 lambda: len(pod.starts) == 2, T)
    cluster.wait("every worker back with the restarted coordinator",
                 lambda: all("the coordinator restarted" in w.current().log()
                             for w in workers(cluster)), T)
    settle(cluster)


def kill_one(cluster, name):
    pod = cluster.pods[name]
    n = joins(cluster, name)
    cluster.kill_container(name)
    cluster.wait(name + " restarted and joined",
                 lambda: len(pod.starts) == 2 and joins(cluster, name) > n, T)
    settle(cluster)


def scale(cluster, leavers):
    cluster.scale("kolo-worker", 6)
    cluster.wait("kolo-worker-4 and -5 joined",
                 lambda: all(joins(cluster, n) for n in ("kolo-worker-4", "kolo-worker-5")), T)
    settle(cluster)
    leavers += [cluster.pods["kolo-worker-%d" % i] for i in (3, 4, 5)]
    cluster.scale("kolo-worker", 3)
    cluster.wait("kolo-worker-3, -4 and -5 gone",
                 lambda: len(workers(cluster)) == 3, T)
    settle(cluster)


def check(cluster, leavers, want):
    cluster.wait("every worker finished (EL_FINAL, then idle)",
                 lambda: all("idle until the pod is deleted" in p.current().log()
                             for p in workers(cluster)), T * 2)
    cluster.wait("the coordinator ended the job (exit 0, idle)",
                 lambda: "idle until" in coordinator(cluster).current().log(), T)
    bad = []
    for p in workers(cluster):
        got = re.findall(r"EL_FINAL .*fingerprint=(\w+)", p.current().log())
        if got != [want]:
            bad.append("%s: EL_FINAL fingerprints %s, want [%s]" % (p.name, got, want))
    for p in leavers:
        c = p.starts[-1]
        if c.rc != 0 or "SIGKILL" in c.log():
            bad.append("%s: the leaver exited %s, want 0\n%s" % (p.name, c.rc, c.log()[-2000:]))
    if bad:
        for p in cluster.pods.values():
            print("---- %s\n%s" % (p.name, p.logs()[-3000:]))
        raise AssertionError("\n".join(bad))
    cluster.say("all %d workers end with fingerprint %s (the unfaulted run's)"
                % (len(workers(cluster)), want))


def run(scenario, steps, bin_dir, work):
    import harness
    cluster = harness.Cluster(MANIFEST, bin_dir, work)
    try:
        args = worker_args(cluster, steps)
        want = reference(bin_dir, args)
        cluster.say("scenario %s: unfaulted fingerprint %s" % (scenario, want))
        cluster.apply()
        cluster.wait("4 workers training", lambda: step(cluster) >= 100, T)
        leavers = []
        if scenario in ("ci", "coordinator", "all"):
            restart_coordinator(cluster)
        if scenario in ("ci", "delete", "all"):
            delete_one(cluster, "kolo-worker-2", leavers)
        if scenario in ("ci", "kill", "all"):
            kill_one(cluster, "kolo-worker-1")
        if scenario in ("ci", "scale", "all"):
            scale(cluster, leavers)
        if step(cluster) >= steps - 50:
            raise AssertionError("training ended before the faults were done; raise --steps")
        check(cluster, leavers, want)
    finally:
        cluster.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="ci",
                    choices=["ci", "coordinator", "delete", "kill", "scale",
                             "all"])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--keep-logs", action="store_true")
    ap.add_argument("--no-settle", action="store_true",
                    help="fault again as soon as a worker joined (reproduces the hang "
                    "described in docs/kubernetes.md)")
    a = ap.parse_args()
    # SIGTERM (ctest, a CI runner) unwinds too, so the cleanup runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    global NO_SETTLE
    NO_SETTLE = a.no_settle
    if os.geteuid() != 0:
        skip("needs root (network namespaces)")
    try:
        import yaml  # noqa: F401
    except ImportError:
        skip("needs python3-yaml")
    probe = "kkprobe%d" % os.getpid()
    if subprocess.run(["ip", "netns", "add", probe], stderr=subprocess.DEVNULL).returncode:
        skip("ip netns is unavailable")
    subprocess.run(["ip", "netns", "del", probe])
    bin_dir = os.environ.get("KOLO_BIN_DIR", os.path.join(REPO, "build/bin"))
    work = tempfile.mkdtemp(prefix="kolo-k8s-")
    names = (["coordinator", "delete", "kill", "scale"] if a.scenario == "all"
             else [a.scenario])
    if a.scenario == "ci" and os.environ.get("KOLO_LONG_TESTS") == "1":
        names += ["delete", "kill", "scale"]
    try:
        for s in names:
            t0 = time.monotonic()
            run(s, a.steps, bin_dir, work)
            print("PASS %s (%.1f s)" % (s, time.monotonic() - t0), flush=True)
    finally:
        if a.keep_logs:
            print("logs in " + work)
        else:
            subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
