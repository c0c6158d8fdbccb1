"""Ranks on two hosts, as a cluster has them: two Linux network namespaces on this
machine joined by a veth pair (host 0 = 10.77.0.1/24, host 1 = 10.77.0.2/24), each with
its own loopback, and `sparsebalance run` started once per rank inside its host's
namespace with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT). MASTER_ADDR is host 0's veth address, not loopback, and
GLOO_SOCKET_IFNAME names each host's veth, so the store and every Gloo group cross the
veth as they would cross a network between nodes.

- DP across the hosts trains equal to one process on the same manifest (loss and
  grad_norm of every iteration, the one-process tolerances of
  test_pipeline_metrics_oracle.py), and the gradients did travel over the veth.
- A host that disappears ends the job within the timeout (parallelism.timeout_s):
  every process of host 1 killed (its sockets close: the ranks of host 0 stop at once,
  naming a rank of host 1), or host 1's link taken down (nothing closes: host 0 stops
  after the timeout, and so does host 1, which lost the store).

The layout is a parameter: launch(dp, tp, ranks_per_host) puts world rank r on host
r // ranks_per_host (ranks are (dp_rank x tp + tp_rank) with pp = cp = 1, so TP stays
inside a host and DP goes across). Needs root and iproute2 (`ip netns add`); skips
without them.
"""

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("SB_BINARY", str(REPO / "build" / "sparsebalance"))

SUBNET = "10.77.0"          # host h is SUBNET.(h + 1); the namespaces keep it private
MASTER_PORT = 29500         # fresh namespaces: nothing else listens there
HOSTS = 2
_clusters = itertools.count()


def _ip_binary():
    return shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip") if os.path.exists(p)), None)


IP = _ip_binary()


def ip(*args, check=True):
    return subprocess.run([IP, *args], capture_output=True, text=True, check=check, timeout=30)


class TwoHosts:
    """Two network namespaces joined by a veth pair; names unique per process and call."""

    def __init__(self):
        tag = f"sb2h{os.getpid()}x{next(_clusters)}"
        self.netns = [f"{tag}h{h}" for h in range(HOSTS)]
        self.ifname = [f"sbveth{h}" for h in range(HOSTS)]  # per namespace, so no clash
        self.addr = [f"{SUBNET}.{h + 1}" for h in range(HOSTS)]
        self.made = []

    def up(self):
        for ns in self.netns:
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", self.ifname[0], "netns", self.netns[0], "type", "veth",
           "peer", "name", self.ifname[1], "netns", self.netns[1])
        for h in range(HOSTS):
            ip("-n", self.netns[h], "addr", "add", f"{self.addr[h]}/24", "dev", self.ifname[h])
            ip("-n", self.netns[h], "link", "set", self.ifname[h], "up")
        return self

    def pids(self, host):
        out = ip("netns", "pids", self.netns[host], check=False).stdout
        return [int(p) for p in out.split()]

    def kill_host(self, host):
        """SIGKILL every process of the host (the machine crashed)."""
        pids = self.pids(host)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids

    def unplug(self, host):
        """The host's link goes down: its packets stop, no connection is closed."""
        ip("-n", self.netns[host], "link", "set", self.ifname[host], "down")

    def tx_bytes(self, host):
        return int(ip("netns", "exec", self.netns[host], "cat",
                      f"/sys/class/net/{self.ifname[host]}/statistics/tx_bytes").stdout)

    def down(self):
        for h, ns in enumerate(self.netns):
            if ns in self.made:
                self.kill_host(h)
        for ns in reversed(self.made):
            ip("netns", "del", ns, check=False)  # deleting host 0 deletes the veth pair
        self.made = []


@pytest.fixture(scope="session")
def netns_rights():
    if IP is None:
        pytest.skip("two-host test: iproute2's `ip` is not installed")
    if os.geteuid() != 0:
        pytest.skip("two-host test: making network namespaces (ip netns add) needs root")
    probe = TwoHosts()
    try:
        probe.up()
    except subprocess.CalledProcessError as e:
        pytest.skip(f"two-host test: this machine cannot make network namespaces and a veth pair "
                    f"({' '.join(e.cmd[1:])}: {e.stderr.strip()})")
    finally:
        probe.down()


def manifest(name, dp, tp, iterations, timeout_s):
    """The small DP manifest of the dist tests (tests/dist/job_fixture.cpp)."""
    parallelism = {"dp": dp, "timeout_s": timeout_s}
    if tp != 1:
        parallelism["tp"] = tp
    return {
        "name": name,
        "seed": 5,
        "model": {"preset": "qwen2-test"},
        "data": {"synthetic": {"length_mixture": [{"min_tokens": 8, "max_tokens": 60}]}},
        "parallelism": parallelism,
        "train": {"iterations": iterations, "warmup_iterations": 1, "global_batch_size": 8,
                  "max_tokens_per_microbatch": 64, "threads": 1},
        "methods": [{"name": "dense"}],
    }


def describe_rank(rank, tp):
    """The start of the trainer's name for a rank (ParallelLayout::describe_rank, pp = cp = 1)."""
    return f"rank {rank} (dp {rank // tp}, stage 0"


def records(run_dir):
    path = run_dir / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []


class Rank:
    def __init__(self, rank, host, proc, log):
        self.rank, self.host, self.proc, self.log = rank, host, proc, log

    def output(self):
        return self.log.read_text(errors="replace")

    def wait(self, until):
        """Exit code, or None if still running at `until` (time.monotonic())."""
        try:
            return self.proc.wait(timeout=max(0.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None


class TwoHostJob:
    """One `sparsebalance run` per rank; world rank r on host r // ranks_per_host."""

    def __init__(self, root, dp, tp, ranks_per_host, iterations, timeout_s, env):
        self.dp, self.tp, self.ranks_per_host, self.timeout_s = dp, tp, ranks_per_host, timeout_s
        self.world = dp * tp
        assert self.world == HOSTS * ranks_per_host, "the layout must fill exactly two hosts"
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.name = f"twohosts_dp{dp}_tp{tp}"
        self.manifest = root / f"{self.name}.json"
        self.manifest.write_text(json.dumps(manifest(self.name, dp, tp, iterations, timeout_s)))
        self.results = root / "results"
        self.run_dir = self.results / self.name / "dense"
        self.extra_env = env or {}
        self.cluster = TwoHosts()
        self.ranks = []

    def host_of(self, rank):
        return rank // self.ranks_per_host

    def ranks_on(self, host):
        return [r for r in self.ranks if r.host == host]

    def start(self):
        self.cluster.up()
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("SLURM_", "TORCHELASTIC_", "GLOO_", "SB_FAULT_INJECT"))
                and k not in ("SB_LAUNCHER_PID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                              "MASTER_ADDR", "MASTER_PORT")}
        for rank in range(self.world):
            host = self.host_of(rank)
            env = dict(base, RANK=str(rank), WORLD_SIZE=str(self.world),
                       LOCAL_RANK=str(rank % self.ranks_per_host), LOCAL_WORLD_SIZE=str(self.ranks_per_host),
                       MASTER_ADDR=self.cluster.addr[0], MASTER_PORT=str(MASTER_PORT),
                       GLOO_SOCKET_IFNAME=self.cluster.ifname[host], **self.extra_env)
            log = self.root / f"rank{rank}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [IP, "netns", "exec", self.cluster.netns[host], BINARY, "run", str(self.manifest),
                     "--results", str(self.results), "--progress-every", "1"],
                    env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            self.ranks.append(Rank(rank, host, proc, log))
        return self

    def logs(self):
        return "\n".join(f"--- rank {r.rank} (host {r.host}), exit {r.proc.poll()}:\n{r.output()}"
                         for r in self.ranks)

    def wait_all(self, seconds):
        until = time.monotonic() + seconds
        return [r.wait(until) for r in self.ranks]

    def wait_for_records(self, count, seconds=120):
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            if len(records(self.run_dir)) >= count:
                return True
            if any(r.proc.poll() is not None for r in self.ranks):
                return False
            time.sleep(0.05)
        return False

    def stop(self):
        for r in self.ranks:
            if r.proc.poll() is None:
                r.proc.kill()
        self.cluster.down()
        for r in self.ranks:
            try:
                r.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture
def launch(tmp_path, netns_rights):
    """launch(dp, tp, ranks_per_host, iterations=..., timeout_s=..., env=...) -> started
    TwoHostJob; its namespaces and processes go when the test ends, whatever happened."""
    jobs = []

    def start(dp, tp, ranks_per_host, iterations=4, timeout_s=30, env=None):
        job = TwoHostJob(tmp_path / f"job{len(jobs)}", dp, tp, ranks_per_host, iterations, timeout_s, env)
        jobs.append(job)
        return job.start()

    yield start
    for job in jobs:
        job.stop()


def one_process_run(root, dp, tp, iterations):
    root.mkdir(parents=True, exist_ok=True)
    m = manifest("one_process", 1, 1, iterations, 30)
    path = root / "one_process.json"
    path.write_text(json.dumps(m))
    proc = subprocess.run([BINARY, "run", str(path), "--results", str(root)],
                          capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root / "one_process" / "dense"


def check_equals_one_process(tmp_path, launch, dp, tp, ranks_per_host):
    iterations = 4
    job = launch(dp, tp, ranks_per_host, iterations=iterations)
    codes = job.wait_all(240)
    assert codes == [0] * job.world, job.logs()
    two_hosts = records(job.run_dir)
    single = records(one_process_run(tmp_path / "one", dp, tp, iterations))
    assert len(two_hosts) == len(single) == iterations, job.logs()
    assert [r["tokens"] for r in two_hosts] == [r["tokens"] for r in single]
    assert [r["loss"] for r in two_hosts] == pytest.approx([r["loss"] for r in single], rel=1e-5)
    assert [r["grad_norm"] for r in two_hosts] == pytest.approx([r["grad_norm"] for r in single], rel=1e-4)
    world = json.loads((job.run_dir / "context.json").read_text())["world"]
    assert world["launched_by"] == "environment (RANK, WORLD_SIZE)"
    assert (world["dp"], world["world_size"], world["ranks_per_host"]) == (dp, dp * tp, ranks_per_host)
    # The DP all-reduce crossed the veth: each host sent at least its half of the float32
    # gradients every iteration (any all-reduce of two ranks: the reduce-scatter half).
    for host in range(HOSTS):
        assert job.cluster.tx_bytes(host) > iterations * qwen2_parameter_count(**QWEN2_TEST) * 4 // 2 // tp, \
            job.logs()


# models/qwen2/qwen2_config.cpp's qwen2-test preset, the model these jobs train.
QWEN2_TEST = dict(vocab=128, hidden=32, intermediate=64, layers=2, heads=4, kv_heads=2, head_dim=8, tied=False)


def qwen2_parameter_count(vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, tied):
    """Parameters of HF's Qwen2ForCausalLM for this config (26,912 for qwen2-test, as
    transformers' num_parameters() gives): q/k/v with biases, o, the gated MLP, two norms
    per layer, the final norm, the embedding and an untied head."""
    q, kv = heads * head_dim, kv_heads * head_dim
    layer = hidden * q + q + 2 * (hidden * kv + kv) + q * hidden + 3 * hidden * intermediate + 2 * hidden
    return vocab * hidden * (1 if tied else 2) + layers * layer + hidden


def test_dp_across_two_hosts_equals_one_process(tmp_path, launch):
    check_equals_one_process(tmp_path, launch, dp=2, tp=1, ranks_per_host=1)


def start_and_reach_iteration_2(launch, timeout_s):
    job = launch(2, 1, 1, iterations=500, timeout_s=timeout_s)
    assert job.wait_for_records(2), "the job never reached iteration 2:\n" + job.logs()
    return job


def lost_ranks_named(job, host, output):
    return any(describe_rank(r.rank, job.tp) in output for r in job.ranks_on(host))


def test_a_crashed_host_stops_the_other_host_at_once(launch):
    # Every process of host 1 is killed: the kernel closes their sockets, host 0's ranks
    # fail in their next collective and name the silent rank, well inside the timeout.
    timeout_s = 20
    job = start_and_reach_iteration_2(launch, timeout_s)
    killed = job.cluster.kill_host(1)
    crashed = time.monotonic()
    assert {r.proc.pid for r in job.ranks_on(1)} <= set(killed), job.logs()
    for r in job.ranks_on(0):
        code = r.wait(crashed + timeout_s + 10)
        seconds = time.monotonic() - crashed
        assert code == 1, f"rank {r.rank} exited {code} after {seconds:.1f} s\n" + job.logs()
        assert seconds < timeout_s, job.logs()
        assert lost_ranks_named(job, 1, r.output()), job.logs()


def test_a_host_that_drops_off_the_network_stops_both_hosts_within_the_timeout(launch):
    # Host 1's link goes down: no FIN, no RST, its TCP connections stay open. Host 0's
    # ranks (which serve the store) stop after the timeout: host 1 sent no heartbeat, or a
    # collective timed out; host 1's ranks, cut off from the store, stop too.
    timeout_s = 8
    job = start_and_reach_iteration_2(launch, timeout_s)
    job.cluster.unplug(1)
    unplugged = time.monotonic()
    slack = 15
    for host in range(HOSTS):
        for r in job.ranks_on(host):
            code = r.wait(unplugged + timeout_s + slack)
            seconds = time.monotonic() - unplugged
            assert code == 1, f"rank {r.rank} (host {host}) exited {code} after {seconds:.1f} s\n" + job.logs()
            assert seconds < timeout_s + slack, job.logs()
            if host == 0:
                assert seconds > timeout_s - 1, "stopped before the timeout could pass?\n" + job.logs()
                output = r.output()
                assert lost_ranks_named(job, 1, output) or re.search(r"time(d)? ?out", output), job.logs()
