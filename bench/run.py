"""Benchmark a broker with the C load generator (bench/loadgen.c).

Scenarios (see bench/README.md):
  a  one producer and one consumer at once, unsettled sends (window 1000), credit 1000
  b  the same, pre-settled both ways
  c  fill COUNT messages with no consumer, then drain them (reported as c-fill and c-drain)

By default it starts our broker (``python -m proton_broker --port 0``) as a subprocess; with
``--url`` it measures any AMQP 1.0 broker (give ``--pid`` to get that broker's CPU time).
In the same invocation it runs the same scenarios against the generator's trivial fast peer
(``loadgen peer``), the generator's ceiling, and prints our figures as ratios of it.

Broker CPU is read from /proc/PID/stat (utime + stime) before and after each run; on a
2-core machine where the generator competes for the CPU it is the fairer figure.

Usage: PYTHONPATH=. .venv/bin/python bench/run.py [--scenarios a,b,c] [--count N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    """One measured phase: rate, and CPU seconds per 100k messages."""

    rate: float
    broker_cpu: float | None  # broker CPU-s per 100k messages (None: unknown PID)
    gen_cpu: float  # generator CPU-s per 100k messages


@dataclass
class Results:
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    def add(self, name: str, sample: Sample) -> None:
        self.samples.setdefault(name, []).append(sample)

    def median(self, name: str) -> Sample:
        got = self.samples[name]
        cpus = [s.broker_cpu for s in got if s.broker_cpu is not None]
        return Sample(statistics.median(s.rate for s in got),
                      statistics.median(cpus) if cpus else None,
                      statistics.median(s.gen_cpu for s in got))


def build_loadgen() -> Path:
    out = subprocess.run([str(HERE / "build.sh")], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def proc_cpu(pid: int | None) -> float | None:
    """utime + stime of ``pid`` in seconds (children not included)."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2:].split()  # skip "pid (comm) "; fields[0] is state
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def per_100k(seconds: float | None, count: int) -> float | None:
    return None if seconds is None else seconds * 100_000 / count


def run_scenario(loadgen: Path, scenario: str, hostport: str, pid: int | None,
                 args: argparse.Namespace, queue: str, count: int) -> dict[str, Sample]:
    """Run one generator process; returns the samples by phase name (a, b, c-fill, c-drain)."""
    cmd = [str(loadgen), scenario, "-H", hostport, "-q", queue, "-n", str(count),
           "-w", str(args.window), "-c", str(args.credit), "-s", str(args.body),
           "-t", str(args.timeout)]
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
        broker = None if before is None or after is None else after - before
        name = scenario if phase == "all" else f"{scenario}-{phase}"
        samples[name] = Sample(rate, per_100k(broker, count), per_100k(gen_cpu, count) or 0.0)
    return samples


def measure(loadgen: Path, hostport: str, pid: int | None, args: argparse.Namespace,
            label: str) -> Results:
    results = Results()
    if args.warmup:
        run_scenario(loadgen, "a", hostport, pid, args, f"bench-warmup-{os.getpid()}",
                     args.warmup)
    for rep in range(args.repeat):
        for scenario in args.scenarios:
            queue = f"bench-{scenario}-{os.getpid()}-{rep}"
            for name, sample in run_scenario(loadgen, scenario, hostport, pid, args, queue,
                                             args.count).items():
                results.add(name, sample)
                if args.verbose:
                    print(f"  [{label}] {name} run {rep + 1}: {sample.rate:,.0f} msgs/s "
                          f"broker {fmt(sample.broker_cpu)} gen {fmt(sample.gen_cpu)} "
                          "CPU-s/100k", file=sys.stderr)
    return results


def fmt(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def start_peer(loadgen: Path) -> tuple[subprocess.Popen[str], str]:
    peer = subprocess.Popen([str(loadgen), "peer", "-H", "127.0.0.1:0", "-w",
                             "1000"], stdout=subprocess.PIPE, text=True)
    assert peer.stdout is not None
    line = peer.stdout.readline()
    if not line.startswith("listening on "):
        peer.kill()
        raise SystemExit(f"peer did not start: {line!r}")
    return peer, line.split()[-1]


def print_table(title: str, ours: Results, ceiling: Results | None) -> None:
    print(f"\n{title}")
    head = f"{'scenario':<10} {'msgs/s':>10} {'broker CPU-s/100k':>18} {'gen CPU-s/100k':>15}"
    if ceiling:
        head += f" {'peer msgs/s':>12} {'ours/peer':>10} {'peer CPU-s/100k':>16}"
    print(head)
    for name in ours.samples:
        s = ours.median(name)
        row = f"{name:<10} {s.rate:>10,.0f} {fmt(s.broker_cpu):>18} {fmt(s.gen_cpu):>15}"
        if ceiling and name in ceiling.samples:
            c = ceiling.median(name)
            row += f" {c.rate:>12,.0f} {s.rate / c.rate:>10.2f} {fmt(c.broker_cpu):>16}"
        print(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Measure msgs/s and broker CPU per 100k messages with bench/loadgen.c.")
    parser.add_argument("--url", help="broker to measure, amqp://[user:pass@]host:port "
                        "(default: start ours as a subprocess)")
    parser.add_argument("--pid", type=int, help="PID of the --url broker, for its CPU time")
    parser.add_argument("--scenarios", default="a,b,c",
                        help="comma-separated subset of a,b,c (default: a,b,c)")
    parser.add_argument("--count", type=int, default=100_000, help="messages per run")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per scenario; the median is reported")
    parser.add_argument("--window", type=int, default=1000, help="producer unsettled window")
    parser.add_argument("--credit", type=int, default=1000, help="consumer credit")
    parser.add_argument("--body", type=int, default=100, help="body size in bytes")
    parser.add_argument("--warmup", type=int, default=2000,
                        help="messages of scenario a sent first, not measured (0: none)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per run")
    parser.add_argument("--sasl", action="store_true", help="connect with SASL ANONYMOUS")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="skip the generator-ceiling run against the trivial peer")
    parser.add_argument("--broker-arg", action="append", default=[],
                        help="extra argument for our broker's command line (repeatable)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every run")
    args = parser.parse_args(argv)
    args.scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if not args.scenarios or set(args.scenarios) - {"a", "b", "c"}:
        parser.error("--scenarios takes a comma-separated subset of a,b,c")
    args.user = args.password = None

    loadgen = build_loadgen()
    broker = None
    if args.url:
        url = urlparse(args.url if "//" in args.url else f"amqp://{args.url}")
        hostport = f"{url.hostname or '127.0.0.1'}:{url.port or 5672}"
        args.user, args.password = url.username, url.password
        pid, title = args.pid, f"broker at {hostport}"
    else:
        sys.path.insert(0, str(REPO))
        from proton_broker.testing import BrokerProcess

        broker = BrokerProcess(*args.broker_arg).start()
        hostport, pid, title = f"{broker.host}:{broker.port}", broker.pid, "proton-broker"

    try:
        started = time.monotonic()
        ours = measure(loadgen, hostport, pid, args, "broker")
    finally:
        if broker is not None:
            broker.stop()
    ceiling = None
    if not args.no_ceiling:
        peer, peer_addr = start_peer(loadgen)
        try:
            ceiling = measure(loadgen, peer_addr, peer.pid, args, "peer")
        finally:
            peer.kill()
            peer.wait()

    print(f"\n{os.cpu_count()} CPUs, {cpu_model()}; {args.count:,} messages of "
          f"{args.body} bytes per run, median of {args.repeat}; "
          f"{time.monotonic() - started:.0f} s")
    print_table(title, ours, ceiling)
    if ceiling:
        print("\npeer: the generator against its trivial fast peer (bench/loadgen.c 'peer'), "
              "its ceiling; 'peer CPU-s/100k' is the peer's own CPU.")
    return 0


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
