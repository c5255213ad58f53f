#!/usr/bin/python3
"""A stand-in for the kubelet and two controllers, for deploy/kubernetes/.

It reads the manifests (a Secret, Services, a one-replica Deployment and a
StatefulSet) and runs each pod's container command and args, with the pod's
environment, in a network namespace of its own on one machine:

- pods get IPs in 10.244.0.0/24 on veth pairs to a bridge in a "node"
  namespace; every namespace is the harness's own and is deleted at the end;
- env: `value`, and `valueFrom.fieldRef` for metadata.name and status.podIP;
- a Secret volume is written to a temporary directory, its files in the
  volume's defaultMode (0400); its mountPath is replaced by that directory
  in the args and env values (no mount namespace);
- a Service name in an env value (`NAME:PORT` or `NAME.NS.svc...:PORT`) is
  replaced by the IP of the pod the Service selects (no DNS here);
- the image's programs map onto this machine's: /usr/bin/kolo-* to
  $KOLO_BIN_DIR/kolo-*, /usr/local/bin/kolo-pod to deploy/kubernetes/kolo-pod,
  /usr/share/kolo/examples/* to examples/*;
- the pod's host name is its name (a UTS namespace of its own);
- restartPolicy Always: a container that exits is started again, after 1 s
  (the kubelet's back-off starts at 10 s), its output in a new log;
- deleting a pod: SIGTERM to the container's process, SIGKILL to all of it
  after terminationGracePeriodSeconds; the StatefulSet then makes the pod
  again under the same name; scaling down deletes the highest ordinals.

Single-threaded: one loop (Cluster.tick) reaps processes and runs the
controllers; the scenarios call it while they wait. Invariant: every
process and namespace the harness made is gone when Cluster.close returns.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESTART_DELAY_S = 1.0


def sh(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


class Container:
    """One start of a pod's container: its process and its log."""

    def __init__(self, proc, log_path):
        self.proc = proc
        self.log_path = log_path
        self.rc = None

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


class Pod:
    def __init__(self, name, template, owner, ip, netns):
        self.name = name
        self.template = template
        self.owner = owner  # the controller's name
        self.ip = ip
        self.netns = netns
        self.starts = []  # Containers, oldest first
        self.deleting_since = None
        self.restart_at = None
        self.gone = False

    @property
    def spec(self):
        return self.template["spec"]

    def current(self):
        return self.starts[-1] if self.starts else None

    def logs(self):
        return "".join(c.log() for c in self.starts)


class Cluster:
    def __init__(self, manifests, bin_dir, work_dir, quiet=False):
        self.objs = list(yaml.safe_load_all(open(manifests)))
        self.bin_dir = bin_dir
        self.work = work_dir
        self.tag = "kk%d" % os.getpid()
        self.node = self.tag + "-node"
        self.pods = {}
        self.next_ip = 10
        self.replicas = {}
        self.serial = 0
        self.t0 = time.monotonic()
        self.quiet = quiet
        sh("ip", "netns", "add", self.node)
        sh("ip", "-n", self.node, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.node, "link", "set", "br0", "up")

    def say(self, msg):
        if not self.quiet:
            print("[%6.2f s] %s" % (time.monotonic() - self.t0, msg), flush=True)

    def find(self, kind, name=None):
        return [o for o in self.objs if o and o["kind"] == kind
                and (name is None or o["metadata"]["name"] == name)]

    # --- pods -------------------------------------------------------------
    def _netns(self, pod_name):
        ns = "%s-%d" % (self.tag, self.next_ip)
        ip = "10.244.0.%d" % self.next_ip
        veth = "h%d" % self.next_ip
        self.next_ip += 1
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", self.node, "link", "add", veth, "type", "veth",
           "peer", "name", "eth0", "netns", ns)
        sh("ip", "-n", self.node, "link", "set", veth, "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns, ip

    def create_pod(self, name, template, owner):
        ns, ip = self._netns(name)
        pod = Pod(name, template, owner, ip, ns)
        self.pods[name] = pod
        self.say("pod %s created (%s)" % (name, ip))
        self._start(pod)
        return pod

    def _map_path(self, word, mounts):
        for src, dst in mounts.items():
            if word == src or word.startswith(src + "/"):
                return dst + word[len(src):]
        if word.startswith("/usr/bin/kolo"):
            return os.path.join(self.bin_dir, os.path.basename(word))
        if word == "/usr/local/bin/kolo-pod":
            return os.path.join(REPO, "deploy/kubernetes/kolo-pod")
        if word.startswith("/usr/share/kolo/examples/"):
            return os.path.join(REPO, "examples", word[len("/usr/share/kolo/examples/"):])
        return word

    def _service_ip(self, value):
        for svc in self.find("Service"):
            name = svc["metadata"]["name"]
            m = re.fullmatch(re.escape(name) + r"(\.[a-z0-9.-]+)?:(\d+)", value)
            if not m:
                continue
            sel = svc["spec"].get("selector", {})
            for pod in self.pods.values():
                labels = pod.template["metadata"].get("labels", {})
                if not pod.gone and all(labels.get(k) == v for k, v in sel.items()):
                    port = m.group(2)
                    for p in svc["spec"].get("ports", []):
                        if str(p["port"]) == port:
                            port = str(p.get("targetPort", port))
                    return "%s:%s" % (pod.ip, port)
        return value

    def _volumes(self, pod, container):
        mounts = {}
        vols = {v["name"]: v for v in pod.spec.get("volumes", [])}
        for vm in container.get("volumeMounts", []):
            vol = vols[vm["name"]]
            secret = self.find("Secret", vol["secret"]["secretName"])[0]
            d = tempfile.mkdtemp(dir=self.work, prefix=pod.name + "-secret-")
            data = dict(secret.get("stringData", {}))
            for k, v in data.items():
                path = os.path.join(d, k)
                with open(path, "w") as f:
                    f.write(v)
                os.chmod(path, vol["secret"].get("defaultMode", 0o644))
            mounts[vm["mountPath"]] = d
        return mounts

    def _start(self, pod):
        c = pod.spec["containers"][0]
        mounts = self._volumes(pod, c)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
               "HOSTNAME": pod.name}
        for e in c.get("env", []):
            if "value" in e:
                v = str(e["value"])
            else:
                path = e["valueFrom"]["fieldRef"]["fieldPath"]
                v = {"metadata.name": pod.name, "status.podIP": pod.ip}[path]
            env[e["name"]] = self._map_path(self._service_ip(v), mounts)
        argv = [self._map_path(w, mounts) for w in c["command"] + c.get("args", [])]
        self.serial += 1
        log = os.path.join(self.work, "%s.%d.log" % (pod.name, self.serial))
        with open(log, "w") as out:
            # Its own UTS namespace too: a pod's host name is its name.
            proc = subprocess.Popen(["ip", "netns", "exec", pod.netns, "unshare", "--uts",
                                     "sh", "-c", 'hostname "$0" && exec "$@"', pod.name] + argv,
                                    env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        pod.starts.append(Container(proc, log))
        pod.restart_at = None

    def delete_pod(self, name):
        pod = self.pods[name]
        if pod.deleting_since is None:
            self.say("pod %s deleted: SIGTERM" % name)
            pod.deleting_since = time.monotonic()
            c = pod.current()
            if c and c.rc is None:
                c.proc.send_signal(signal.SIGTERM)

    def kill_container(self, name):
        c = self.pods[name].current()
        self.say("container of %s killed (SIGKILL)" % name)
        os.killpg(c.proc.pid, signal.SIGKILL)

    def scale(self, name, n):
        self.say("statefulset %s scaled to %d" % (name, n))
        self.replicas[name] = n

    def apply(self):
        for d in self.find("Deployment"):
            self.create_pod(d["metadata"]["name"] + "-7d9f4",
                            d["spec"]["template"], d["metadata"]["name"])
        for s in self.find("StatefulSet"):
            self.replicas.setdefault(s["metadata"]["name"], s["spec"]["replicas"])
        self.tick()

    # --- the loop ---------------------------------------------------------
    def _remove(self, pod):
        pod.gone = True
        sh("ip", "netns", "del", pod.netns)
        del self.pods[pod.name]
        self.say("pod %s gone (exit %s)" % (pod.name, pod.current().rc))

    def tick(self):
        now = time.monotonic()
        for pod in list(self.pods.values()):
            c = pod.current()
            if c.rc is None and c.proc.poll() is not None:
                c.rc = c.proc.returncode
                if pod.deleting_since is None:
                    self.say("container of %s exited %d; restart in %.0f s"
                             % (pod.name, c.rc, RESTART_DELAY_S))
                    pod.restart_at = now + RESTART_DELAY_S
            if pod.deleting_since is not None:
                grace = pod.spec.get("terminationGracePeriodSeconds", 30)
                if c.rc is None and now - pod.deleting_since > grace:
                    self.say("pod %s: grace period over, SIGKILL" % pod.name)
                    os.killpg(c.proc.pid, signal.SIGKILL)
                if c.rc is not None:
                    self._kill_group(c)
                    self._remove(pod)
            elif pod.restart_at is not None and now >= pod.restart_at:
                self._kill_group(c)
                self._start(pod)
                self.say("container of %s restarted (start %d)" % (pod.name, len(pod.starts)))
        for s in self.find("StatefulSet"):
            self._statefulset(s)

    def _statefulset(self, s):
        name = s["metadata"]["name"]
        n = self.replicas[name]
        mine = {p.name: p for p in self.pods.values() if p.owner == name}
        for i in range(n):
            if "%s-%d" % (name, i) not in mine:
                self.create_pod("%s-%d" % (name, i), s["spec"]["template"], name)
        for pname, pod in sorted(mine.items(), key=lambda kv: -int(kv[0].rsplit("-", 1)[1])):
            if int(pname.rsplit("-", 1)[1]) >= n:
                self.delete_pod(pname)

    def wait(self, what, cond, timeout):
        end = time.monotonic() + timeout
        while True:
            self.tick()
            if cond():
                self.say("ok: " + what)
                return
            if time.monotonic() > end:
                raise AssertionError("timed out after %.0f s waiting for: %s" % (timeout, what))
            time.sleep(0.05)

    @staticmethod
    def _kill_group(c):
        try:
            os.killpg(c.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def close(self):
        for pod in list(self.pods.values()):
            c = pod.current()
            if c:
                self._kill_group(c)
                try:
                    c.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        for pod in list(self.pods.values()):
            subprocess.run(["ip", "netns", "del", pod.netns], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "netns", "del", self.node], stderr=subprocess.DEVNULL)
        self.pods = {}
