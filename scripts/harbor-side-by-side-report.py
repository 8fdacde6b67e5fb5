#!/usr/bin/env python3
"""The figures of scripts/harbor-side-by-side.sh: reads OUT/runs.tsv, Harbor's
job directories and reeval's records; prints per round the wall time in total
and per task for each tool, the ratio, where the time went, and whether both
got the same rewards; writes OUT/results.json and OUT/results.md.

Exit status: 0 when every round's rewards agree, 1 when they do not, 2 when a
run left no results."""

import datetime as dt
import glob
import json
import os
import re
import statistics
import sys


def ts(s):
    """A Harbor time (UTC, with or without Z) as seconds since the epoch."""
    s = s.replace("Z", "+00:00")
    t = dt.datetime.fromisoformat(s)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


def span(d):
    return ts(d["finished_at"]) - ts(d["started_at"]) if d else 0.0


def eval_name(task_name):
    short = task_name.rsplit("/", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9_-]", "_", short)
    return name or "task"


def harbor_trials(job_dir):
    """Per task: seconds, phases, rewards, error."""
    out = {}
    for path in glob.glob(os.path.join(job_dir, "*", "result.json")):
        r = json.load(open(path))
        total = span(r)
        steps = r.get("step_results") or []
        agent = span(r.get("agent_execution")) + sum(span(s.get("agent_execution")) for s in steps)
        verifier = span(r.get("verifier")) + sum(span(s.get("verifier")) for s in steps)
        env = span(r.get("environment_setup"))
        rewards = (r.get("verifier_result") or {}).get("rewards")
        exc = r.get("exception_info")
        out[eval_name(r["task_name"])] = {
            "seconds": total,
            "phases": {
                "environment (build, up)": env,
                "oracle": agent,
                "verifier": verifier,
                "rest (copies, collect, down)": total - env - agent - verifier,
            },
            "reward": rewards,
            "error": exc and exc.get("exception_type"),
        }
    return out


START = {"preflight", "image", "container", "gateway"}
SETUP = {"env", "workspace", "files", "setup", "snapshot"}


def reeval_attempts(run_dir):
    out = {}
    for path in glob.glob(os.path.join(run_dir, "*.json")):
        if os.path.basename(path) in ("summary.json",):
            continue
        r = json.load(open(path))
        if "eval" not in r:
            continue
        ph = {"start (image, container, gateway)": 0, "setup (workdir, snapshot)": 0,
              "oracle": 0, "verifier (copies, test.sh, captures)": 0, "teardown": 0}
        after_turn = False
        for p in r["phases"]:
            s = p["durationMs"] / 1000
            name = p["phase"]
            if name in START:
                ph["start (image, container, gateway)"] += s
            elif name in SETUP:
                ph["setup (workdir, snapshot)"] += s
            elif name == "teardown":
                ph["teardown"] += s
            elif name == "turn":
                after_turn = True
                ph["oracle"] += s
            elif after_turn:
                ph["verifier (copies, test.sh, captures)"] += s
            else:
                ph["oracle"] += s
        out[r["eval"]] = {
            "seconds": r["timings"]["totalMs"] / 1000,
            "phases": ph,
            "reward": r.get("reward"),
            "error": r["kind"] if r["outcome"] not in ("pass", "fail") else None,
            "image": next((p["detail"] for p in r["phases"] if p["phase"] == "image"), ""),
        }
    return out


def same_reward(a, b):
    if a is None or b is None:
        return a is None and b is None
    if set(a) != set(b):
        return False
    return all(abs(float(a[k]) - float(b[k])) < 1e-9 for k in a)


def fmt_reward(r):
    if r is None:
        return "none"
    return ",".join(f"{k}={float(v):g}" for k, v in sorted(r.items()))


def main(out_dir):
    runs = {}
    with open(os.path.join(out_dir, "runs.tsv")) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            row = dict(zip(header, line.rstrip("\n").split("\t")))
            runs.setdefault(int(row["round"]), {})[row["tool"]] = row
    lines = []
    say = lines.append
    say(open(os.path.join(out_dir, "machine.txt")).read().rstrip())
    results = {"rounds": []}
    all_agree = True
    for rnd in sorted(runs):
        h, rv = runs[rnd].get("harbor"), runs[rnd].get("reeval")
        if not h or not rv:
            continue
        ht = harbor_trials(h["dir"])
        rt = reeval_attempts(rv["dir"].rstrip("/"))
        if not ht or not rt:
            print(f"round {rnd}: a run left no results (see {out_dir}/*-round{rnd}.log)", file=sys.stderr)
            return 2
        h_wall = float(h["end"]) - float(h["start"])
        r_wall = float(rv["end"]) - float(rv["start"])
        # Harbor's own job time (its "Total runtime"): without its start-up
        # and what it does after the job before it exits.
        job = json.load(open(os.path.join(h["dir"], "result.json")))
        h_job = span(job)
        first = "Harbor" if float(h["start"]) < float(rv["start"]) else "reeval"
        say("")
        say(f"## Round {rnd} ({first} first)")
        say("")
        say(f"wall: Harbor {h_wall:.1f}s (load {h['load_before']} → {h['load_after']}, exit {h['exit']}), "
            f"reeval {r_wall:.1f}s (load {rv['load_before']} → {rv['load_after']}, exit {rv['exit']}): "
            f"reeval {h_wall / r_wall:.2f}× faster")
        say(f"Harbor's job alone (its Total runtime): {h_job:.1f}s "
            f"(+{ts(job['started_at']) - float(h['start']):.1f}s before, "
            f"+{float(h['end']) - ts(job['finished_at']):.1f}s after it): "
            f"reeval {h_job / r_wall:.2f}× faster")
        say("")
        say("| task | Harbor s | reeval s | ratio | Harbor reward | reeval reward | same |")
        say("|---|---:|---:|---:|---|---|---|")
        tasks = sorted(set(ht) | set(rt))
        rows = []
        for t in tasks:
            a, b = ht.get(t), rt.get(t)
            agree = bool(a and b and same_reward(a["reward"], b["reward"]))
            all_agree &= agree
            hs = a["seconds"] if a else float("nan")
            rs = b["seconds"] if b else float("nan")
            say(f"| {t} | {hs:.1f} | {rs:.1f} | {hs / rs:.1f}× | {fmt_reward(a and a['reward'])} | "
                f"{fmt_reward(b and b['reward'])} | {'yes' if agree else 'NO'} |")
            rows.append({"task": t, "harbor": a, "reeval": b, "same_reward": agree})
        hsum = sum(x["seconds"] for x in ht.values())
        rsum = sum(x["seconds"] for x in rt.values())
        say(f"| **sum of tasks** | {hsum:.1f} | {rsum:.1f} | {hsum / rsum:.1f}× | | | |")
        say("")
        say("Where the time went (seconds, summed over tasks):")
        say("")
        hph, rph = {}, {}
        for x in ht.values():
            for k, v in x["phases"].items():
                hph[k] = hph.get(k, 0) + v
        for x in rt.values():
            for k, v in x["phases"].items():
                rph[k] = rph.get(k, 0) + v
        say("- Harbor: " + ", ".join(f"{k} {v:.1f}" for k, v in hph.items()))
        say("- reeval: " + ", ".join(f"{k} {v:.1f}" for k, v in rph.items()))
        results["rounds"].append({
            "round": rnd, "first": first,
            "harbor": {"wall_s": h_wall, "job_s": h_job, "sum_s": hsum, "load": [h["load_before"], h["load_after"]],
                       "phases_s": hph, "exit": int(h["exit"])},
            "reeval": {"wall_s": r_wall, "sum_s": rsum, "load": [rv["load_before"], rv["load_after"]],
                       "phases_s": rph, "exit": int(rv["exit"])},
            "wall_ratio": h_wall / r_wall, "job_ratio": h_job / r_wall, "tasks": rows,
        })
    if not results["rounds"]:
        print("no complete round", file=sys.stderr)
        return 2
    ratios = [r["wall_ratio"] for r in results["rounds"]]
    job_ratios = [r["job_ratio"] for r in results["rounds"]]
    say("")
    say(f"## Overall: wall ratio (Harbor / reeval) per round {', '.join(f'{x:.2f}' for x in ratios)}; "
        f"median {statistics.median(ratios):.2f}× (Harbor's job alone: median "
        f"{statistics.median(job_ratios):.2f}×); rewards {'the same in every round' if all_agree else 'DIFFER'}")
    results["median_wall_ratio"] = statistics.median(ratios)
    results["median_job_ratio"] = statistics.median(job_ratios)
    results["rewards_agree"] = all_agree
    text = "\n".join(lines) + "\n"
    print(text)
    open(os.path.join(out_dir, "results.md"), "w").write(text)
    json.dump(results, open(os.path.join(out_dir, "results.json"), "w"), indent=2)
    return 0 if all_agree else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
