#!/usr/bin/env python3
"""Speed of coopsim's simrd profile against simrd itself, point by point (issue 34).

For each DTR log x heuristic x memory ratio, runs one point of DTR's reference simulator (simrd,
from a checkout the user supplies: uwsampl/dtr-prototype simrd/, needs `attrs`) and the same point
of coopsim's simrd profile, each as its own process, and measures whole-process CPU seconds (user +
system, from wait4) as the median of --repeat runs, simrd's and coopsim's taking turns. A simrd
point is what simrd needs to run one point from the log: parse it, the no-eviction baseline
(RuntimeV1, for the budget), then the run (RuntimeV2EagerOptimized, as scripts/compare_simrd.py and
simrd's run_pareto). A coopsim point is `coopsim run --json` on the log imported once beforehand
(`import dtr --compat simrd`; the import's CPU time is printed per log, not counted), its report
read from standard output as simrd's result is. Prints a markdown table with both verdicts and
clocks (simrd clock - 1 = coopsim simulated_ns) and the ratio simrd / coopsim.

  scripts/bench_simrd.py --simrd PATH/simrd --logs PATH/logs --coopsim build/src/coopsim \
      [--heuristics dtr,msps,dtr-eq] [--ratios 0.3,0.5,0.8] [--only lstm,unet] [--repeat 3] \
      [--simrd-cache FILE]

--simrd-cache keeps simrd's figures per point (log, heuristic, ratio, verdict, clock, CPU seconds)
in a CSV file and reuses them on later runs, so that a new coopsim build is measured against the
same simrd runs without running simrd again (simrd takes minutes per point on the larger logs).
A cached figure was measured at another time, when the machine may have run faster or slower: for a
ratio, measure both sides in one sitting.
"""
import argparse
import csv
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_simrd import HEURISTICS, simrd_points  # noqa: E402


def simrd_point(simrd_path, log, h, ratio):
    """One point in this process: prints 'verdict clock-1'."""
    _, _, results = simrd_points(simrd_path, log, [(h, ratio)])
    verdict, _, clock = results[(h, ratio)]
    print(verdict, clock)


def run_once(cmd):
    """(whole-process CPU seconds, stdout) of one run of cmd."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = p.stdout.read(), p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit('failed ({}): {}\n{}'.format(p.returncode, ' '.join(cmd), stderr))
    return usage.ru_utime + usage.ru_stime, stdout


def timed(cmds, repeat):
    """Per command, (median whole-process CPU seconds, stdout of the last run). The commands take
    turns (a, b, a, b, ...), so that both sides of a ratio see the machine in the same state."""
    secs, outs = [[] for _ in cmds], ['' for _ in cmds]
    for _ in range(repeat):
        for i, cmd in enumerate(cmds):
            t, outs[i] = run_once(cmd)
            secs[i].append(t)
    return [(statistics.median(s), o) for s, o in zip(secs, outs)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--simrd', help='directory holding the simrd package (simrd/simrd/...)')
    ap.add_argument('--logs', help='directory of DTR logs (*.log)')
    ap.add_argument('--coopsim', default='build/src/coopsim')
    ap.add_argument('--heuristics', default='dtr,msps,dtr-eq')
    ap.add_argument('--ratios', default='0.3,0.5,0.8')
    ap.add_argument('--only', default='', help='comma list of substrings: logs to run')
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--simrd-cache', help='CSV of simrd figures per point, read and extended')
    ap.add_argument('--point', nargs=3, metavar=('LOG', 'HEURISTIC', 'RATIO'), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.point:
        simrd_point(os.path.abspath(a.simrd), a.point[0], a.point[1], float(a.point[2]))
        return
    if not a.simrd or not a.logs:
        ap.error('--simrd and --logs are required')
    logs = sorted(glob.glob(os.path.join(a.logs, '*.log')), key=os.path.getsize)
    if a.only:
        logs = [l for l in logs if any(s in os.path.basename(l) for s in a.only.split(','))]
    if not logs:
        sys.exit('no logs matched in ' + a.logs)
    heuristics = a.heuristics.split(',')
    for h in heuristics:
        if h not in HEURISTICS:
            sys.exit('unknown heuristic ' + h + ' (valid: ' + ', '.join(HEURISTICS) + ')')
    ratios = [float(x) for x in a.ratios.split(',')]
    print('| log | heuristic | ratio | simrd | coopsim | same verdict and clock | simrd CPU s | coopsim CPU s | ratio |')
    print('|---|---|---|---|---|---|---|---|---|', flush=True)
    ratios_seen, agree, total = [], 0, 0
    cache = {}
    if a.simrd_cache and os.path.exists(a.simrd_cache):
        with open(a.simrd_cache) as f:
            for row in csv.reader(f):
                cache[(row[0], row[1], float(row[2]))] = (row[3], row[4], float(row[5]))
    with tempfile.TemporaryDirectory() as work:
        for log in logs:
            name = os.path.basename(log).split('-')[0]
            trace = os.path.join(work, name + '.jsonl')
            [(import_secs, _)] = timed([[a.coopsim, 'import', 'dtr', log, '--compat', 'simrd', '-o', trace]], 1)
            keep = os.path.join(work, 'keep.csv')
            subprocess.run([a.coopsim, 'run', trace, '-a', 'fungible', '-p', 'keep', '-b', str(1 << 50),
                            '--csv', keep, '-q'], check=True)
            with open(keep) as f:
                peak = int(next(csv.DictReader(f))['peak_requested_bytes'])
            print('| {} | (import dtr --compat simrd, once) | | | | | | {:.3f} | |'.format(name, import_secs), flush=True)
            for h in heuristics:
                for r in ratios:
                    # The JSON report on standard output, as simrd prints its result: writing a file
                    # (and replacing the previous point's) is work simrd's side does not do.
                    c_cmd = [a.coopsim, 'run', trace, '-a', 'fungible', '-p', 'dtr', '-b', str(int(peak * r)),
                             '--set', 'dtr.compat=simrd', '--set', 'dtr.heuristic=' + h, '--json']
                    if (name, h, r) in cache:
                        s_verdict, s_clock, s_secs = cache[(name, h, r)]
                        [(c_secs, c_out)] = timed([c_cmd], a.repeat)
                    else:
                        s_cmd = [sys.executable, os.path.abspath(__file__), '--simrd', a.simrd, '--point', log, h,
                                 str(r)]
                        (s_secs, s_out), (c_secs, c_out) = timed([s_cmd, c_cmd], a.repeat)
                        s_verdict, s_clock = s_out.split()
                        if a.simrd_cache:
                            with open(a.simrd_cache, 'a') as f:
                                f.write('{},{},{},{},{},{}\n'.format(name, h, r, s_verdict, s_clock, s_secs))
                    report = json.loads(c_out)
                    row = {'status': report['status'], 'simulated_ns': report['time']['simulated_ns']}
                    c_verdict = {'thrashed': 'thrash'}.get(row['status'], row['status'])
                    same = s_verdict == c_verdict and int(s_clock) == int(row['simulated_ns'])
                    ratio = s_secs / c_secs if c_secs > 0 else math.inf
                    total += 1
                    agree += same
                    ratios_seen.append(ratio)
                    print('| {} | {} | {} | {} {} | {} {} | {} | {:.3f} | {:.4f} | {:.1f}x |'.format(
                        name, h, r, s_verdict, s_clock, c_verdict, row['simulated_ns'], 'yes' if same else '**no**',
                        s_secs, c_secs, ratio), flush=True)
    print()
    print('- points: {}; same verdict and clock: {}'.format(total, agree))
    print('- simrd / coopsim CPU: min {:.1f}x, median {:.1f}x, max {:.1f}x; points >= 100x: {}'.format(
        min(ratios_seen), statistics.median(ratios_seen), max(ratios_seen), sum(r >= 100 for r in ratios_seen)))


if __name__ == '__main__':
    main()
