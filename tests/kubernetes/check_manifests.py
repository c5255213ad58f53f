#!/usr/bin/python3
"""Offline checks of deploy/kubernetes/ and deploy/docker/Dockerfile.

kubectl's client-side dry run and --validate need an API server (they fetch
its OpenAPI schema), so this machine checks what it can without one:
- every document parses as YAML and has apiVersion, kind and metadata.name;
- each Deployment and StatefulSet selects its own template's labels, and
  each Service selects the labels of some pod template;
- the workers: restartPolicy Always (StatefulSet), a grace period of at
  least 30 s, POD_NAME and POD_IP from the downward API, KOLO_ELASTIC=1,
  KOLO_HOST_COORDINATOR=0, KOLO_COORDINATOR naming the coordinator's Service
  and port;
- Secret volumes use defaultMode 0400, and name a Secret of the manifests;
- the coordinator has --min-np <= the StatefulSet's replicas <= --max-np,
  and --np equal to the replicas;
- the Dockerfile: every COPY source (outside --from) exists in the tree, and
  every program the manifests start is one the image has.
Prints one line per file checked; exit 1 on the first list of problems.
Single-threaded, reads files only.
"""

import glob
import os
import re
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
problems = []


def need(cond, msg):
    if not cond:
        problems.append(msg)


def templates(objs):
    for o in objs:
        if o["kind"] in ("Deployment", "StatefulSet"):
            yield o, o["spec"]["template"]
        elif o["kind"] == "MPIJob":
            for r in o["spec"]["mpiReplicaSpecs"].values():
                yield o, r["template"]


def check_elastic(objs):
    by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
    secrets = {n for k, n in by if k == "Secret"}
    for o, t in templates(objs):
        if "selector" in o["spec"]:
            sel = o["spec"]["selector"]["matchLabels"]
            labels = t["metadata"]["labels"]
            need(all(labels.get(k) == v for k, v in sel.items()),
                 "%s: selector does not match its template" % o["metadata"]["name"])
        for v in t["spec"].get("volumes", []):
            if "secret" in v:
                need(v["secret"].get("defaultMode") == 0o400,
                     "%s: secret volume mode is not 0400" % o["metadata"]["name"])
                need(v["secret"]["secretName"] in secrets,
                     "%s: no Secret %s" % (o["metadata"]["name"], v["secret"]["secretName"]))
    svc_ports = {}
    for (k, n), s in by.items():
        if k != "Service":
            continue
        sel = s["spec"]["selector"]
        need(any(all(t["metadata"].get("labels", {}).get(a) == b for a, b in sel.items())
                 for _, t in templates(objs)), "Service %s selects no pod" % n)
        for p in s["spec"].get("ports", []):
            svc_ports[n] = p["port"]
    sts = [o for o in objs if o["kind"] == "StatefulSet"][0]
    spec = sts["spec"]["template"]["spec"]
    need(spec.get("restartPolicy", "Always") == "Always", "workers: restartPolicy")
    need(spec.get("terminationGracePeriodSeconds", 30) >= 30, "workers: grace period")
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    need(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name", "POD_NAME")
    need(env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", "POD_IP")
    need(env["KOLO_ELASTIC"]["value"] == "1", "KOLO_ELASTIC")
    need(env["KOLO_HOST_COORDINATOR"]["value"] == "0", "KOLO_HOST_COORDINATOR")
    host, port = env["KOLO_COORDINATOR"]["value"].split(":")
    need(svc_ports.get(host.split(".")[0]) == int(port), "KOLO_COORDINATOR names no Service port")
    dep = [o for o in objs if o["kind"] == "Deployment"][0]
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    flag = {a: int(args[i + 1]) for i, a in enumerate(args) if a in ("--np", "--min-np", "--max-np")}
    n = sts["spec"]["replicas"]
    need(flag["--min-np"] <= n <= flag["--max-np"], "replicas outside [--min-np, --max-np]")
    need(flag["--np"] == n, "--np differs from the StatefulSet's replicas")
    need(dep["spec"]["replicas"] == 1, "more than one coordinator")


def image_programs(dockerfile):
    have = set()
    text = open(dockerfile).read()
    for m in re.finditer(r"^COPY\s+(--from=\S+\s+)?(\S+)\s+(\S+)$", text, re.M):
        src, dst = m.group(2), m.group(3)
        if not m.group(1):
            need(glob.glob(os.path.join(REPO, src)), "Dockerfile: COPY source %s is missing" % src)
        have.add(dst)
    return have


def main():
    have = image_programs(os.path.join(REPO, "deploy/docker/Dockerfile"))
    print("deploy/docker/Dockerfile: COPY sources present")
    for path in sorted(glob.glob(os.path.join(REPO, "deploy/kubernetes/*.yaml"))):
        objs = [o for o in yaml.safe_load_all(open(path)) if o]
        for o in objs:
            need(o.get("apiVersion") and o.get("kind") and o.get("metadata", {}).get("name"),
                 "%s: a document lacks apiVersion, kind or metadata.name" % path)
        if any(o["kind"] == "StatefulSet" for o in objs):
            check_elastic(objs)
        for _, t in templates(objs):
            for c in t["spec"]["containers"]:
                for w in c.get("command", []) + c.get("args", []):
                    if w.startswith("/usr/bin/kolo") or w.startswith("/usr/local/bin/"):
                        # kolorun, kolo-coordinator come from the .deb.
                        need(w in have or w in ("/usr/bin/kolorun", "/usr/bin/kolo-coordinator"),
                             "%s: the image has no %s" % (path, w))
        print("%s: %d objects: %s" % (os.path.relpath(path, REPO), len(objs),
                                      ", ".join("%s/%s" % (o["kind"], o["metadata"]["name"])
                                                for o in objs)))
    if problems:
        print("\n".join(problems))
        sys.exit(1)


if __name__ == "__main__":
    main()
