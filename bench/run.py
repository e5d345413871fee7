"""Benchmark a broker with the C load generator (bench/loadgen.c).

Scenarios (see bench/README.md):
  a  one producer and one consumer at once, unsettled sends (window 1000), credit 1000
  b  the same, pre-settled both ways
  c  fill COUNT messages with no consumer, then drain them (reported as c-fill and c-drain)

``--producers N`` and ``--consumers N`` (loadgen ``-P``/``-C``) use several of each, every one
on its own connection; the window is per producer, the credit per consumer.

By default it starts our broker (``python -m proton_broker --port 0``) as a subprocess; with
``--url`` it measures any AMQP 1.0 broker (give ``--pid`` to get that broker's CPU time).
In the same invocation it runs the same scenarios against the generator's trivial fast peer
(``loadgen peer``), the generator's ceiling, and prints our figures as ratios of it; with
``--vs-example-broker`` also against Proton's own C example broker (``examples/c/broker.c``,
built by ``bench/build.sh example-broker``), the reference the plain path is held to.

Broker CPU is read from /proc/PID/stat (utime + stime) before and after each run; on a
2-core machine where the generator competes for the CPU it is the fairer figure.

Usage: PYTHONPATH=. .venv/bin/python bench/run.py [--scenarios a,b,c] [--count N] [--repeat R]
                                                 [--producers N] [--consumers N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
FANOUT_EXCHANGE = "amq.fanout"
EXAMPLE_BROKER = "Proton's C example broker"


@dataclass
class Sample:
    """One measured phase: rate, and CPU seconds per 100k messages."""

    rate: float
    broker_cpu: float | None  # broker CPU-s per 100k messages (None: unknown PID)
    broker_sys: float | None  # the part of broker_cpu spent in the kernel (page faults, I/O)
    gen_cpu: float  # generator CPU-s per 100k messages


@dataclass
class Results:
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def add(self, name: str, sample: Sample) -> None:
        self.samples.setdefault(name, []).append(sample)

    def median(self, name: str) -> Sample:
        got = self.samples[name]
        cpus = [s.broker_cpu for s in got if s.broker_cpu is not None]
        syss = [s.broker_sys for s in got if s.broker_sys is not None]
        return Sample(
            statistics.median(s.rate for s in got),
            statistics.median(cpus) if cpus else None,
            statistics.median(syss) if syss else None,
            statistics.median(s.gen_cpu for s in got),
        )


def build_loadgen() -> Path:
    out = subprocess.run([str(HERE / "build.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def proc_cpu(pid: int | None) -> tuple[float, float] | None:
    """(utime + stime, stime) of ``pid`` in seconds (children not included)."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # skip "pid (comm) "; fields[0] is state
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLK_TCK, stime / CLK_TCK


def per_100k(seconds: float | None, count: int) -> float | None:
    return None if seconds is None else seconds * 100_000 / count


def run_scenario(
    loadgen: Path,
    scenario: str,
    hostport: str,
    pid: int | None,
    args: argparse.Namespace,
    queue: str,
    count: int,
) -> dict[str, Sample]:
    """Run one generator process; returns the samples by phase name (a, b, c-fill, c-drain)."""
    cmd = [
        str(loadgen),
        scenario,
        "-H",
        hostport,
        "-q",
        queue,
        "-n",
        str(count),
        "-w",
        str(args.window),
        "-c",
        str(args.credit),
        "-s",
        str(args.body),
        "-t",
        str(args.timeout),
        "-P",
        str(args.producers),
        "-C",
        str(args.consumers),
    ]
    if args.groups:
        cmd += ["-g", str(args.groups)]
    if args.ungrouped:
        cmd.append("-G")
    if args.durable:
        cmd.append("-d")
    if args.lvq_keys:
        cmd += ["-k", str(args.lvq_keys)]
    if args.fanout:  # every consumer subscribes to the exchange: COUNT x C delivered
        cmd.append("-F")
        cmd[cmd.index("-q") + 1] = FANOUT_EXCHANGE
        count *= args.consumers
    if args.sasl:
        cmd.append("-S")
    if args.user:
        cmd += ["-u", args.user, "-p", args.password or ""]
    marks = [proc_cpu(pid)]
    results: list[tuple[str, float, float]] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as gen:
        assert gen.stdout is not None
        for line in gen.stdout:
            if line.startswith("PHASE"):
                marks.append(proc_cpu(pid))
            elif line.startswith("RESULT"):
                kv = dict(item.split("=", 1) for item in line.split()[1:])
                results.append((kv["phase"], float(kv["rate"]), float(kv["cpu"])))
        status = gen.wait()
    marks.append(proc_cpu(pid))
    if status != 0 or not results:
        raise SystemExit(f"load generator failed (status {status}): {' '.join(cmd)}")
    samples = {}
    for i, (phase, rate, gen_cpu) in enumerate(results):
        before, after = marks[i], marks[i + 1] if i + 1 < len(marks) else marks[-1]
        name = scenario if phase == "all" else f"{scenario}-{phase}"
        cpu = kernel = None  # unknown without the broker's PID
        if before is not None and after is not None:
            cpu, kernel = after[0] - before[0], after[1] - before[1]
        samples[name] = Sample(
            rate, per_100k(cpu, count), per_100k(kernel, count), per_100k(gen_cpu, count) or 0.0
        )
    return samples


@dataclass
class Target:
    """Something to measure: a broker (ours, a baseline checkout, --url) or the peer."""

    label: str
    hostport: str
    pid: int | None
    results: Results = field(default_factory=Results)
    overrides: dict[str, Any] = field(default_factory=dict)  # workload options for this one


def measure(loadgen: Path, targets: list[Target], args: argparse.Namespace) -> None:
    """Run every scenario against every target, interleaved so drift hits all alike."""
    if args.warmup:
        for n, target in enumerate(targets):
            run_scenario(
                loadgen,
                "a",
                target.hostport,
                target.pid,
                workload(args, target),
                f"bench-warmup-{os.getpid()}-{n}",
                args.warmup,
            )
    for rep in range(args.repeat):
        for scenario in args.scenarios:
            for n, target in enumerate(targets):
                queue = f"bench-{scenario}-{os.getpid()}-{rep}-{n}"
                backlog = workload(args, target).backlog
                if backlog:  # a standing depth: the run's consumers take from its front
                    run_scenario(
                        loadgen,
                        "fill",
                        target.hostport,
                        None,
                        workload(args, target),
                        queue,
                        backlog,
                    )
                for name, sample in run_scenario(
                    loadgen,
                    scenario,
                    target.hostport,
                    target.pid,
                    workload(args, target),
                    queue,
                    args.count,
                ).items():
                    target.results.add(name, sample)
                    if args.verbose:
                        print(
                            f"  [{target.label}] {name} run {rep + 1}: "
                            f"{sample.rate:,.0f} msgs/s, broker {fmt(sample.broker_cpu)} "
                            f"(system {fmt(sample.broker_sys)}), "
                            f"generator {fmt(sample.gen_cpu)} CPU-s/100k",
                            file=sys.stderr,
                        )


def workload(args: argparse.Namespace, target: Target) -> argparse.Namespace:
    """The run options for ``target``: the command line's, with the target's overrides."""
    return argparse.Namespace(**{**vars(args), **target.overrides})


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def start_peer(loadgen: Path) -> tuple[subprocess.Popen[str], str]:
    peer = subprocess.Popen(
        [str(loadgen), "peer", "-H", "127.0.0.1:0", "-w", "1000"], stdout=subprocess.PIPE, text=True
    )
    assert peer.stdout is not None
    line = peer.stdout.readline()
    if not line.startswith("listening on "):
        peer.kill()
        raise SystemExit(f"peer did not start: {line!r}")
    return peer, line.split()[-1]


def print_table(target: Target, others: list[Target]) -> None:
    """Our figures, then each other target's rate and CPU as ratios (ours / theirs)."""
    print(f"\n{target.label}")
    head = f"{'scenario':<10} {'msgs/s':>10} {'broker CPU-s/100k':>18} {'gen CPU-s/100k':>15}"
    for other in others:
        head += f" | {other.label + ' msgs/s':>22} {'rate ratio':>10} {'CPU ratio':>9}"
    print(head)
    ours = target.results
    for name in ours.samples:
        s = ours.median(name)
        row = f"{name:<10} {s.rate:>10,.0f} {fmt(s.broker_cpu):>18} {fmt(s.gen_cpu):>15}"
        for other in others:
            if name not in other.results.samples:
                continue
            o = other.results.median(name)
            cpu = s.broker_cpu / o.broker_cpu if s.broker_cpu is not None and o.broker_cpu else None
            row += f" | {o.rate:>22,.0f} {s.rate / o.rate:>10.2f} {fmt(cpu):>9}"
        print(row)
    for other in others:
        for name in ours.samples:
            ratios = pair_ratios(ours.samples[name], other.results.samples.get(name, []))
            if len(ratios) > 1:
                print(
                    f"  {name}, CPU ratio to {other.label} run by run: "
                    f"{' '.join(fmt(r) for r in ratios)} (median {fmt(statistics.median(ratios))})"
                )


def pair_ratios(ours: list[Sample], theirs: list[Sample]) -> list[float]:
    """Our broker CPU over theirs, run by run: the runs are interleaved, so each pair shares
    its moment of the machine's drift, which the ratio of the two medians does not."""
    return [
        a.broker_cpu / b.broker_cpu
        for a, b in zip(ours, theirs, strict=False)
        if a.broker_cpu is not None and b.broker_cpu
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Measure msgs/s and broker CPU per 100k messages with bench/loadgen.c."
    )
    parser.add_argument(
        "--url",
        help="broker to measure, amqp://[user:pass@]host:port "
        "(default: start ours as a subprocess)",
    )
    parser.add_argument("--pid", type=int, help="PID of the --url broker, for its CPU time")
    parser.add_argument(
        "--scenarios", default="a,b,c", help="comma-separated subset of a,b,c (default: a,b,c)"
    )
    parser.add_argument("--count", type=int, default=100_000, help="messages per run")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per scenario; the median is reported"
    )
    parser.add_argument("--window", type=int, default=1000, help="unsettled window per producer")
    parser.add_argument("--credit", type=int, default=1000, help="credit per consumer")
    parser.add_argument(
        "--producers",
        type=int,
        default=1,
        help="producers, each on its own connection (COUNT is split over them)",
    )
    parser.add_argument(
        "--consumers", type=int, default=1, help="consumers, each on its own connection"
    )
    parser.add_argument("--body", type=int, default=100, help="body size in bytes")
    parser.add_argument(
        "--warmup",
        type=int,
        default=2000,
        help="messages of scenario a sent first, not measured (0: none)",
    )
    parser.add_argument("--timeout", type=int, default=300, help="seconds per run")
    parser.add_argument(
        "--backlog",
        type=int,
        default=0,
        help="before each run, fill its queue with this many messages (not measured), so "
        "that the run's messages pass through a queue this deep (scenario a)",
    )
    parser.add_argument(
        "--vs-empty",
        action="store_true",
        help="with --backlog: also run the same scenarios on an empty queue, against the "
        "same broker, interleaved, and print the ratios (the cost of the depth itself)",
    )
    parser.add_argument(
        "--groups",
        type=int,
        default=0,
        help="messages carry properties.group-id over this many groups, on a "
        "shared-groups queue (qpid.shared_msg_group asked on the attach)",
    )
    parser.add_argument(
        "--lvq-keys",
        type=int,
        default=0,
        help="messages carry application property k over this many keys, to a last-value "
        "queue keyed by it (qpid.last_value_queue_key asked on the attach)",
    )
    parser.add_argument(
        "--durable",
        action="store_true",
        help="durable messages on a durable queue (stored before accepted)",
    )
    parser.add_argument(
        "--fanout",
        action="store_true",
        help="the consumers subscribe to amq.fanout, so each gets every message; rates and "
        "CPU are per message delivered (COUNT x CONSUMERS)",
    )
    parser.add_argument(
        "--vs-plain",
        action="store_true",
        help="with --groups, --durable, --lvq-keys or --fanout: also run the same scenarios "
        "without them against the same broker, interleaved, and print the ratios; with only "
        "--producers/--consumers above 1: against one producer and one consumer (the cost "
        "of many connections)",
    )
    parser.add_argument(
        "--vs-ungrouped",
        action="store_true",
        help="with --groups or --lvq-keys: also run the same messages (group ids or keys "
        "and all) on a plain queue, against the same broker, interleaved: the cost of "
        "grouping or of last-value replacement itself",
    )
    parser.add_argument("--sasl", action="store_true", help="connect with SASL ANONYMOUS")
    parser.add_argument(
        "--no-ceiling",
        action="store_true",
        help="skip the generator-ceiling run against the trivial peer",
    )
    parser.add_argument(
        "--baseline",
        metavar="CHECKOUT",
        help="also measure the broker of another checkout (e.g. /work/main) "
        "in the same invocation and print our figures as ratios of it",
    )
    parser.add_argument(
        "--vs-example-broker",
        action="store_true",
        help="also run the same scenarios against Proton's C example broker (plain queues "
        "only), interleaved, and print our figures as ratios of it",
    )
    parser.add_argument(
        "--broker-arg",
        action="append",
        default=[],
        help="extra argument for our broker's command line (repeatable)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every run")
    args = parser.parse_args(argv)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if not args.scenarios or set(args.scenarios) - {"a", "b", "c"}:
        parser.error("--scenarios takes a comma-separated subset of a,b,c")
    features = args.groups or args.durable or args.fanout or args.lvq_keys
    args.many_connections = not features and (args.producers > 1 or args.consumers > 1)
    if args.vs_plain and not (features or args.many_connections):
        parser.error(
            "--vs-plain compares a --groups, --durable, --lvq-keys, --fanout or many-connection "
            "run with a plain one"
        )
    if args.vs_empty and not args.backlog:
        parser.error("--vs-empty compares a --backlog run with one on an empty queue")
    if args.backlog and args.scenarios != ["a"]:
        parser.error("--backlog is for scenario a (--scenarios a)")
    if args.groups and args.lvq_keys:
        parser.error("--groups and --lvq-keys are two queue types: one at a time")
    if args.vs_ungrouped and not (args.groups or args.lvq_keys):
        parser.error(
            "--vs-ungrouped compares a --groups or --lvq-keys run with the same messages on a "
            "plain queue"
        )
    if args.producers < 1 or args.consumers < 1:
        parser.error("--producers and --consumers take a number of at least 1")
    if args.vs_example_broker and (features or args.url):
        parser.error(
            "--vs-example-broker runs plain queues against our broker: Proton's example broker "
            "has no last-value queues, groups, durable queues or exchanges"
        )
    args.user = args.password = None
    args.ungrouped = False

    loadgen = build_loadgen()
    targets: list[Target] = []
    processes: list[Any] = []
    started = time.monotonic()
    try:
        if args.url:
            url = urlparse(args.url if "//" in args.url else f"amqp://{args.url}")
            args.user, args.password = url.username, url.password
            hostport = f"{url.hostname or '127.0.0.1'}:{url.port or 5672}"
            targets.append(Target(f"broker at {hostport}", hostport, args.pid))
        else:
            targets.append(start_broker("proton-broker", REPO, args, processes))
        if args.vs_plain:
            ours = targets[0]
            plain: dict[str, Any] = {
                "groups": 0,
                "durable": False,
                "fanout": False,
                "lvq_keys": 0,
            }
            if args.fanout or args.many_connections:  # one producer, one consumer, one queue
                plain.update(producers=1, consumers=1)
            targets.append(Target("same broker, plain", ours.hostport, ours.pid, overrides=plain))
        if args.vs_empty:
            ours = targets[0]
            targets.append(
                Target(
                    "same broker, empty queue", ours.hostport, ours.pid, overrides={"backlog": 0}
                )
            )
        if args.vs_ungrouped:
            ours = targets[0]
            targets.append(
                Target(
                    "same broker, same messages, plain queue",
                    ours.hostport,
                    ours.pid,
                    overrides={"ungrouped": True},
                )
            )
        if args.baseline:
            targets.append(start_broker("baseline", Path(args.baseline).resolve(), args, processes))
        if args.vs_example_broker:
            targets.append(start_example_broker(processes))
        if not args.no_ceiling:
            peer, peer_addr = start_peer(loadgen)
            processes.append(peer)
            targets.append(
                Target("peer", peer_addr, peer.pid, overrides={"fanout": False, "backlog": 0})
            )
        measure(loadgen, targets, args)
    finally:
        for proc in processes:
            proc.stop() if hasattr(proc, "stop") else (proc.kill(), proc.wait())

    print(
        f"\n{os.cpu_count()} CPUs, {cpu_model()}; {args.count:,} messages of "
        f"{args.body} bytes per run, {plural(args.producers, 'producer')} and "
        f"{plural(args.consumers, 'consumer')}, median of {args.repeat}; "
        f"{time.monotonic() - started:.0f} s"
    )
    if args.fanout:
        print(
            f"workload: fan-out through {FANOUT_EXCHANGE} to {plural(args.consumers, 'subscriber')}"
            f" ({args.count * args.consumers:,} deliveries per run); figures per delivery"
        )
    if args.backlog:
        print(f"workload: each run through a queue holding {args.backlog:,} messages")
    if args.groups or args.durable or args.lvq_keys:
        print(
            "workload: "
            + ", ".join(
                filter(
                    None,
                    [
                        args.groups
                        and f"properties.group-id over {args.groups:,} groups on a "
                        "shared-groups queue",
                        args.durable and "durable messages on a durable queue",
                        args.lvq_keys
                        and f"a last-value queue, property k over {args.lvq_keys:,} keys",
                    ],
                )
            )
        )
    print_table(targets[0], targets[1:])
    if not args.no_ceiling:
        print(
            "\npeer: the generator against its trivial fast peer (bench/loadgen.c 'peer'): "
            "the generator's ceiling. Ratios are ours / theirs, CPU ratio compares the "
            "broker's CPU-s/100k with theirs."
        )
    return 0


def start_broker(
    label: str, checkout: Path, args: argparse.Namespace, processes: list[Any]
) -> Target:
    """Start ``python -m proton_broker`` from ``checkout`` (its package first on the path)."""
    sys.path.insert(0, str(REPO))
    from proton_broker.testing import BrokerProcess

    # PYTHONSAFEPATH: "python -m" must not put the current directory first on the path,
    # or every broker would run the package of whatever checkout we were started in.
    env = {
        "PYTHONSAFEPATH": "1",
        "PYTHONPATH": os.pathsep.join(
            [str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    extra = list(args.broker_arg)
    if "--config" not in extra:  # each checkout with its own config file (keys differ)
        extra += ["--config", str(checkout / "conf" / "broker.yaml")]
    broker = BrokerProcess(*extra, env=env).start()
    processes.append(broker)
    return Target(label, f"{broker.host}:{broker.port}", broker.pid)


def start_example_broker(processes: list[Any]) -> Target:
    """Start Proton's C example broker on a free port. It runs from its examples directory,
    where it finds the test certificates it loads (it serves plain AMQP all the same)."""
    out = subprocess.run(
        [str(HERE / "build.sh"), "example-broker"], check=True, capture_output=True, text=True
    )
    binary = out.stdout.strip().splitlines()[-1]
    examples = Path("/usr/share/proton/examples/c")
    broker = subprocess.Popen(
        [binary, "127.0.0.1", "0"],
        cwd=examples if examples.is_dir() else None,
        stdout=subprocess.PIPE,
        text=True,
    )
    processes.append(broker)
    assert broker.stdout is not None
    for line in broker.stdout:  # a line about certificates may come first
        if line.startswith("listening on "):
            # Whatever it prints from now on is read and dropped, so that it never blocks.
            threading.Thread(target=broker.stdout.read, daemon=True).start()
            return Target(EXAMPLE_BROKER, f"127.0.0.1:{line.split()[-1]}", broker.pid)
    raise SystemExit("Proton's example broker did not start")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
