#!/usr/bin/env node
// A stand-in for `kubectl` against a one-node cluster, for kvprof's Kubernetes executor tests: no
// Kubernetes API server runs on the test machine (Debian has none to install), so this answers the
// five commands kvprof sends as kubectl does, and runs each Job's pod as a local process (the
// "PersistentVolumeClaim" is the local folder at the mount path). State lives in $FAKE_KUBE_DIR.
//   create -f FILE -o name | get jobs -l SEL -o json | get job NAME -o json
//   get pods -l job-name=NAME -o json | delete job NAME... --ignore-not-found --wait=false
// $FAKE_KUBE_REFUSE: `create` fails with that message, as an admission webhook or quota would.
"use strict";
const fs = require("fs");
const path = require("path");
const { spawn } = require("child_process");

const dir = process.env.FAKE_KUBE_DIR;
if (!dir) fail("FAKE_KUBE_DIR is not set");
const jobsDir = path.join(dir, "jobs");
fs.mkdirSync(jobsDir, { recursive: true });

function fail(message, code = 1) {
  process.stderr.write(message + "\n");
  process.exit(code);
}

let args = process.argv.slice(2);
fs.appendFileSync(path.join(dir, "calls.log"), args.join(" ") + "\n");
if (args[0] === "--namespace") {
  fs.writeFileSync(path.join(dir, "namespace"), args[1]);
  args = args.slice(2);
}

const jobFile = (name) => path.join(jobsDir, name + ".json");
const exitFile = (name) => path.join(jobsDir, name + ".exit");
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

// The Job as the API server shows it, with the status its pod's process gives it.
function shown(name) {
  const job = JSON.parse(fs.readFileSync(jobFile(name), "utf8"));
  const status = {};
  let pod = { phase: "Pending", terminated: null };
  if (fs.existsSync(exitFile(name))) {
    const code = parseInt(fs.readFileSync(exitFile(name), "utf8"), 10);
    const ok = code === 0;
    status[ok ? "succeeded" : "failed"] = 1;
    status.conditions = [ok ? { type: "Complete", status: "True" }
                            : { type: "Failed", status: "True", reason: "BackoffLimitExceeded",
                                message: "Job has reached the specified backoff limit" }];
    pod = { phase: ok ? "Succeeded" : "Failed",
            terminated: { exitCode: code, reason: ok ? "Completed" : "Error" } };
  } else {
    status.active = 1;
    if (alive(job.fake.pid)) pod.phase = "Running";
  }
  job.status = status;
  job.fake.pod = pod;
  return job;
}

function podOf(job) {
  const p = job.fake.pod;
  const state = p.terminated ? { terminated: p.terminated } : p.phase === "Running"
      ? { running: { startedAt: "2026-11-30T00:00:00Z" } }
      : { waiting: { reason: "ContainerCreating" } };
  return { apiVersion: "v1", kind: "Pod",
           metadata: { name: job.metadata.name + "-x7k2p", labels: { "job-name": job.metadata.name } },
           spec: { nodeName: "fake-node" },
           status: { phase: p.phase, containerStatuses: [{ name: "kvprof", state }] } };
}

function publicJob(job) {
  const { fake, ...rest } = job;
  return rest;
}

const names = () => fs.readdirSync(jobsDir).filter((f) => f.endsWith(".json")).map((f) => f.slice(0, -5));

function create() {
  const file = args[args.indexOf("-f") + 1];
  if (process.env.FAKE_KUBE_REFUSE) fail(process.env.FAKE_KUBE_REFUSE);
  let job;
  try {
    job = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    fail(`error: error parsing ${file}: ${e.message}`);
  }
  const name = job?.metadata?.name;
  if (job.apiVersion !== "batch/v1" || job.kind !== "Job") fail(`error: ${file} is not a batch/v1 Job`);
  if (typeof name !== "string" || !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name))
    fail(`The Job "${name}" is invalid: metadata.name: Invalid value`);
  if (fs.existsSync(jobFile(name)))
    fail(`Error from server (AlreadyExists): error when creating "${file}": jobs.batch "${name}" already exists`);
  const spec = job.spec.template.spec;
  const c = spec.containers[0];
  if (spec.restartPolicy !== "Never" || c.command.join(" ") !== "/bin/bash -c" || !c.image)
    fail(`The Job "${name}" is invalid: spec.template.spec`);
  const mount = c.volumeMounts[0].mountPath;
  if (!fs.existsSync(mount)) fail(`fake: the claim's mount path ${mount} does not exist here`);
  const env = { ...process.env, HOSTNAME: name + "-x7k2p" };
  delete env.FAKE_KUBE_DIR;
  for (const e of c.env || []) {
    // The downward API: the pod's node.
    env[e.name] = e.valueFrom?.fieldRef?.fieldPath === "spec.nodeName" ? "fake-node" : e.value;
  }
  const child = spawn("/bin/bash", ["-c", 'bash -c "$1"; echo $? > "$2"', "pod", c.args[0], exitFile(name)],
                      { detached: true, stdio: "ignore", env });
  child.unref();
  job.fake = { pid: child.pid };
  fs.writeFileSync(jobFile(name), JSON.stringify(job));
  process.stdout.write(`job.batch/${name}\n`);
}

function get() {
  const what = args[1];
  if (what === "jobs") {
    const items = names().map((n) => publicJob(shown(n)));
    process.stdout.write(JSON.stringify({ apiVersion: "v1", kind: "List", items }, null, 2) + "\n");
  } else if (what === "job") {
    const name = args[2];
    if (!fs.existsSync(jobFile(name))) fail(`Error from server (NotFound): jobs.batch "${name}" not found`);
    process.stdout.write(JSON.stringify(publicJob(shown(name)), null, 2) + "\n");
  } else if (what === "pods") {
    const name = args[args.indexOf("-l") + 1].replace(/^job-name=/, "");
    const items = fs.existsSync(jobFile(name)) ? [podOf(shown(name))] : [];
    process.stdout.write(JSON.stringify({ apiVersion: "v1", kind: "List", items }, null, 2) + "\n");
  } else {
    fail(`error: the server doesn't have a resource type "${what}"`);
  }
}

function del() {
  for (const name of args.slice(2).filter((a) => !a.startsWith("--"))) {
    if (!fs.existsSync(jobFile(name))) continue;  // --ignore-not-found
    const job = JSON.parse(fs.readFileSync(jobFile(name), "utf8"));
    try {
      process.kill(-job.fake.pid, "SIGTERM");  // the pod's processes, as the kubelet stops them
    } catch {}
    fs.rmSync(jobFile(name));
    fs.rmSync(exitFile(name), { force: true });
    process.stdout.write(`job.batch "${name}" deleted\n`);
  }
}

({ create, get, delete: del }[args[0]] ?? (() => fail(`error: unknown command "${args[0]}"`)))();
