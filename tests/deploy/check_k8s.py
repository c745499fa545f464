#!/usr/bin/python3
"""Structural check of deploy/k8s (kubectl is not here): every file parses as YAML, and the
fields that make the cluster work agree with each other.  Usage: check_k8s.py DEPLOY_K8S_DIR"""
import pathlib
import re
import sys

import yaml

problems = []


def need(condition, what):
    if not condition:
        problems.append(what)


docs = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.yaml")):
    for doc in yaml.safe_load_all(path.read_text()):
        need(isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc,
             f"{path.name}: a document without apiVersion and kind")
        need("name" in doc.get("metadata", {}), f"{path.name}: a {doc.get('kind')} without a name")
        docs.append(doc)
by_kind = {doc["kind"]: doc for doc in docs}
for kind in ("Service", "StatefulSet", "Secret"):
    need(kind in by_kind, f"no {kind}")
if problems:
    sys.exit("\n".join(problems))

service, sts, secret = by_kind["Service"], by_kind["StatefulSet"], by_kind["Secret"]
spec, pod = sts["spec"], sts["spec"]["template"]["spec"]
labels = sts["spec"]["template"]["metadata"]["labels"]
need(service["spec"].get("clusterIP") == "None", "the Service is not headless (clusterIP: None)")
need(service["spec"].get("publishNotReadyAddresses") is True,
     "the Service must publish not-ready addresses: pods bootstrap before they are ready")
need(spec["serviceName"] == service["metadata"]["name"], "serviceName is not the Service's name")
need(spec["selector"]["matchLabels"].items() <= labels.items(), "the selector misses the pod labels")
need(service["spec"]["selector"].items() <= labels.items(), "the Service selects other pods")
need(pod.get("hostNetwork") is True, "pods need hostNetwork")
need(pod.get("dnsPolicy") == "ClusterFirstWithHostNet", "hostNetwork pods need ClusterFirstWithHostNet")
anti = pod.get("affinity", {}).get("podAntiAffinity", {})
need(any(t.get("topologyKey") == "kubernetes.io/hostname"
         for t in anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])),
     "one pod per host needs a required podAntiAffinity on kubernetes.io/hostname")

(container,) = [c for c in pod["containers"] if c["name"] == "symmeshd"]
command = " ".join(container["command"])
env = {e["name"]: e for e in container.get("env", [])}
need(env.get("SYMMESH_NODES", {}).get("value") == str(spec["replicas"]),
     "SYMMESH_NODES differs from replicas")
bootstrap = re.search(r'--bootstrap "?([^ ":]+):(\d+)', command)
need(bootstrap and bootstrap.group(1).startswith(
    f"{sts['metadata']['name']}-0.{service['metadata']['name']}."),
     "--bootstrap is not pod 0 through the headless service")
ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
need(bootstrap and int(bootstrap.group(2)) == ports.get("bootstrap"), "bootstrap port differs")
need(re.search(r"--control-port (\d+)", command) and
     int(re.search(r"--control-port (\d+)", command).group(1)) == ports.get("control"),
     "control port differs from the Service's")
status = re.search(r'--status-addr "?[^ "]*:(\d+)', command)
probe = container.get("readinessProbe", {}).get("httpGet", {})
need(status and probe.get("path") == "/health" and probe.get("port") == int(status.group(1)),
     "the readiness probe must GET /health on the --status-addr port")
need("IPC_LOCK" in container.get("securityContext", {}).get("capabilities", {}).get("add", []),
     "IPC_LOCK is needed to pin the heap for RDMA")

mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
volumes = {v["name"]: v for v in pod.get("volumes", [])}
secret_file = re.search(r"--secret-file (\S+)", command)
secret_volumes = [n for n, v in volumes.items()
                  if v.get("secret", {}).get("secretName") == secret["metadata"]["name"]]
need(len(secret_volumes) == 1, "the Secret is not mounted")
# symmeshd refuses a secret file that group or others may read (Kubernetes' default is 0644).
need(all(volumes[n]["secret"].get("defaultMode", 0o644) & 0o066 == 0 for n in secret_volumes),
     "the Secret's defaultMode lets group or others read it: symmeshd refuses that (use 0400)")
need(secret_file and secret_volumes and secret_file.group(1).rsplit("/", 1)[0] ==
     mounts.get(secret_volumes[0]), "--secret-file is not in the Secret's mount")
need(secret_file and secret_file.group(1).rsplit("/", 1)[1] in secret.get("stringData", {}),
     "the Secret has no key named like --secret-file")
need(all("REPLACE" in str(v) for v in secret.get("stringData", {}).values()),
     "the example Secret holds what looks like a real secret")
need(any(v.get("hostPath", {}).get("path") == "/dev/infiniband" and
         mounts.get(n) == "/dev/infiniband" for n, v in volumes.items()),
     "/dev/infiniband is not passed through")

if problems:
    sys.exit("deploy/k8s: " + "\n  ".join(problems))
print(f"deploy/k8s: {len(docs)} documents, consistent")
