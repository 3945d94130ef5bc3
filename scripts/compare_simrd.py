#!/usr/bin/env python3
"""Compare coopsim's simrd profile with DTR's reference simulator (simrd) on DTR logs.

Runs simrd (imported as a library from a checkout the user supplies: uwsampl/dtr-prototype
simrd/, needs `attrs`) and coopsim (`import dtr --compat simrd`, then `run -p dtr --set
dtr.compat=simrd`) over logs x heuristics x memory ratios, the way simrd's paper evaluation does
(simrd_experiments/eval/pareto/run.py: run_pareto): budget = int(no-eviction peak x ratio),
runtime RuntimeV2EagerOptimized, remat_limit = baseline compute x (2 - 1). Each side uses its own
no-eviction peak (simrd: RuntimeV1 at an infinite budget; coopsim: `run -p keep`), so the peak
agreement is part of what is measured. Prints a markdown table and a summary: points with the
same verdict (completes / OOM / thrash) and, when both complete, overheads within --tolerance.

  scripts/compare_simrd.py --simrd PATH/simrd --logs PATH/logs --coopsim build/src/coopsim \
      [--ratios 0.1,0.2,...] [--heuristics dtr,dtr-eq,...] [--only unet,resnet] [--jobs 2]

Nothing is copied: the logs and simrd stay where they are; coopsim's traces go to a temporary
directory.
"""
import argparse
import csv
import glob
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading

HEURISTICS = {  # coopsim name -> simrd class name (simrd/heuristic/*.py)
    'dtr': 'DTR', 'dtr-eq': 'DTREqClass', 'dtr-local': 'DTRLocal',
    'msps': 'MSPS', 'lru': 'LRU', 'largest': 'LargestStorage',
}
RATIOS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
OVERHEAD_LIMIT = 2.0


def with_big_stack(f, *args):
    """simrd recurses once per nested rematerialization: run it on a thread with a large stack."""
    sys.setrecursionlimit(10 ** 7)
    threading.stack_size(1 << 29)
    out = {}

    def body():
        try:
            out['value'] = f(*args)
        except BaseException as e:  # re-raised in the caller
            out['error'] = e
    t = threading.Thread(target=body)
    t.start()
    t.join()
    if 'error' in out:
        raise out['error']
    return out['value']


def simrd_log(args):
    """All points of one log under simrd: (baseline memory, baseline compute, {(h, r): (verdict, overhead)})."""
    simrd_path, log, heuristics, ratios = args
    return simrd_points(simrd_path, log, [(h, r) for h in heuristics for r in ratios])


def simrd_points(simrd_path, log, points):
    """The (heuristic, ratio) points of one log under simrd, in this process (also used by
    scripts/bench_simrd.py, one point per process)."""
    sys.path.insert(0, simrd_path)
    from simrd.parse import parse_file
    from simrd.runtime import RuntimeV1, RuntimeV2EagerOptimized
    from simrd.runtime.runtime import RematExceededError
    from simrd.heuristic import Heuristic
    import simrd.heuristic as H

    def run():
        with open(log) as f:
            graph = parse_file(f, start=True)
        callback = graph.get_closure()
        rt = RuntimeV1(math.inf, Heuristic(), stats=False, trace=False)
        callback(rt)
        base_mem = rt.telemetry.summary['max_memory']
        base_compute = rt.telemetry.summary['model_compute']
        results = {}
        for h, r in points:
            rt = RuntimeV2EagerOptimized(int(base_mem * r), getattr(H, HEURISTICS[h])(),
                                         remat_limit=base_compute * (OVERHEAD_LIMIT - 1),
                                         stats=False, trace=False)
            verdict = 'completed'
            try:
                callback(rt)
            except MemoryError:
                verdict = 'oom'
            except RematExceededError:
                verdict = 'thrash'
            results[(h, r)] = (verdict, rt.clock / base_compute, rt.clock - 1)
        return base_mem, base_compute, results
    return with_big_stack(run)


def coopsim_log(coopsim, log, heuristics, ratios, workdir):
    """All points of one log under coopsim's simrd profile: (peak, {(h, r): (verdict, overhead)})."""
    trace = os.path.join(workdir, os.path.basename(log) + '.jsonl')
    subprocess.run([coopsim, 'import', 'dtr', log, '--compat', 'simrd', '-o', trace],
                   check=True, stdout=subprocess.DEVNULL)
    keep = os.path.join(workdir, 'keep.csv')
    subprocess.run([coopsim, 'run', trace, '-a', 'fungible', '-p', 'keep', '-b', str(1 << 50),
                    '--csv', keep, '-q'], check=True)
    with open(keep) as f:
        peak = int(next(csv.DictReader(f))['peak_requested_bytes'])
    budgets = [int(peak * r) for r in ratios]
    points = {}
    for h in heuristics:
        out = os.path.join(workdir, 'dtr.csv')
        subprocess.run([coopsim, 'run', trace, '-a', 'fungible', '-p', 'dtr',
                        '-b', ','.join(str(b) for b in budgets),
                        '--set', 'dtr.compat=simrd', '--set', 'dtr.heuristic=' + h,
                        '--csv', out, '-q'], check=True)
        with open(out) as f:
            rows = list(csv.DictReader(f))
        for r, row in zip(ratios, rows):
            verdict = {'completed': 'completed', 'oom': 'oom', 'thrash': 'thrash',
                       'thrashed': 'thrash'}.get(row['status'], row['status'])
            points[(h, r)] = (verdict, float(row['compute_overhead']), int(row['simulated_ns']))
    return peak, points


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--simrd', required=True, help='directory holding the simrd package (simrd/simrd/...)')
    ap.add_argument('--logs', required=True, help='directory of DTR logs (*.log)')
    ap.add_argument('--coopsim', default='build/src/coopsim')
    ap.add_argument('--ratios', default=','.join(str(r) for r in RATIOS))
    ap.add_argument('--heuristics', default=','.join(HEURISTICS))
    ap.add_argument('--only', default='', help='comma list of substrings: logs to run')
    ap.add_argument('--tolerance', type=float, default=0.01, help='relative overhead tolerance (0.01 = 1 %%)')
    ap.add_argument('--jobs', type=int, default=1, help='simrd logs run in parallel')
    a = ap.parse_args()
    ratios = [float(x) for x in a.ratios.split(',')]
    heuristics = a.heuristics.split(',')
    for h in heuristics:
        if h not in HEURISTICS:
            sys.exit('unknown heuristic ' + h + ' (valid: ' + ', '.join(HEURISTICS) + ')')
    logs = sorted(glob.glob(os.path.join(a.logs, '*.log')), key=os.path.getsize)
    if a.only:
        logs = [l for l in logs if any(s in os.path.basename(l) for s in a.only.split(','))]
    if not logs:
        sys.exit('no logs matched in ' + a.logs)

    jobs = [(os.path.abspath(a.simrd), l, heuristics, ratios) for l in logs]
    rows, agree, total, worst, peaks, identical = [], 0, 0, [], [], 0
    print('| log | heuristic | ratio | simrd | simrd overhead | coopsim | coopsim overhead | diff | clock diff (ns) | agree |')
    print('|---|---|---|---|---|---|---|---|---|---|', flush=True)
    # Logs stream in as simrd finishes them (smallest first), so a long run can be cut short.
    with multiprocessing.Pool(max(1, a.jobs)) as pool, tempfile.TemporaryDirectory() as work:
        for log, (s_mem, s_compute, s_points) in zip(logs, pool.imap(simrd_log, jobs, chunksize=1)):
            c_peak, c_points = coopsim_log(a.coopsim, log, heuristics, ratios, work)
            name = os.path.basename(log).split('-')[0]
            peaks.append((name, s_mem, c_peak))
            for h in heuristics:
                for r in ratios:
                    sv, so, sclock = s_points[(h, r)]
                    cv, co, cclock = c_points[(h, r)]
                    identical += sv == cv and sclock == cclock
                    same = sv == cv and (sv != 'completed' or abs(co - so) <= a.tolerance * so)
                    total += 1
                    agree += same
                    diff = (co - so) / so if sv == cv == 'completed' else float('nan')
                    if sv == cv == 'completed':
                        worst.append((abs(diff), name, h, r, so, co))
                    row = (name, h, r, sv, so, cv, co, diff, same)
                    rows.append(row)
                    d = '' if math.isnan(diff) else '{:+.2%}'.format(diff)
                    print('| {} | {} | {} | {} | {:.4f} | {} | {:.4f} | {} | {} | {} |'.format(
                        name, h, r, sv, so, cv, co, d, cclock - sclock, 'yes' if same else '**no**'), flush=True)

    print()
    print('## Summary')
    print()
    print('- points: {}; same verdict and overhead within {:.0%}: {}'.format(total, a.tolerance, agree))
    mism = sum(1 for row in rows if row[3] != row[5])
    print('- identical (same verdict and the same clock: simrd clock - 1 = coopsim simulated_ns, '
          'where the run stopped included): {}'.format(identical))
    print('- verdict differs: {}'.format(mism))
    worst.sort(reverse=True)
    for w in worst[:5]:
        print('- overhead difference {:.3%}: {} {} ratio {} (simrd {:.4f}, coopsim {:.4f})'.format(*w))
    for name, s, c in peaks:
        print('- no-eviction peak {}: simrd {} B, coopsim {} B ({})'.format(
            name, s, c, 'exact' if s == c else '{:+.3%}'.format((c - s) / s)))


if __name__ == '__main__':
    main()
