"""The digest for people: Markdown for mail and chat, a self-contained HTML page (inline CSS and SVG, no
network) for a browser or an HTML mail. Both render `fleet.digest.report()`; neither computes anything.
The HTML goes through the dashboard's own Jinja environment (`fleet.views.render`)."""

from __future__ import annotations

import shlex

from fleet.views.render import environment, one_line, short
from fleet.safetext import md_code, md_text


def render_markdown(data: dict) -> str:
    """The digest as Markdown; every value that comes from a repository is inert (fleet.safetext)."""
    body, fleet, bulk = data["digest"], data["fleet"], data["bulk"]
    out = [f"# Fleet digest since {body['since']}", "",
           f"Generated {data['generated_at']} · {body['repos_scanned']} repositories watched"
           + (f" (and {len(body['gone_repos'])} gone from disk, listed for their events)."
              if body["gone_repos"] else ".")]
    if not body["event_count"] and not bulk["event_count"]:
        out += ["", f"**No activity** in the fleet since {body['since']}."]
    elif not body["event_count"]:
        out += ["", f"**No work** in the fleet since {body['since']}, only {bulk['summary']}."]
    else:
        repos = {e["repo"] for e in body["events"]}
        shown = len(body["events"])
        out += ["", f"**{body['event_count']} events** in {len(repos)} repositories"
                + (f" (the newest {shown} are listed)" if body["truncated"] else "")
                + (f", plus {bulk['summary']}." if bulk["event_count"] else ".")]
        out += ["", "## Activity", "", "| repository | events |", "|---|---:|"]
        out += [f"| {md_text(row['repo'])} | {row['total']} |" for row in data["activity"]["rows"]]
        out += ["", "## Events"]
        for repo in sorted(repos):
            out += ["", f"### {md_text(repo)}" + (" (gone from disk)" if repo in body["gone_repos"] else ""), ""]
            for ev in (e for e in body["events"] if e["repo"] == repo):
                flag = " **rewrote history**" if ev["rewrote"] else ""
                out.append(f"- {ev['at']} `{ev['kind']}` {md_text(ev['ref'])} {_md_sha(ev['old_sha'])} → "
                           f"{_md_sha(ev['new_sha'])}{flag} — {md_text(one_line(ev['message']))}"
                           + (f" ({md_text(ev['identity'])})" if ev["identity"] else ""))
    if bulk["groups"]:
        out += ["", "## Fetches and other bulk updates, per repository", ""]
        out += [f"- {md_text(g['repo'])}: {g['count']} `{g['kind']}` event{'s' if g['count'] != 1 else ''} on "
                f"{g['ref_count']} ref{'s' if g['ref_count'] != 1 else ''} ({md_text(', '.join(g['refs']))}"
                + (f", … {g['ref_count'] - len(g['refs'])} more" if g["ref_count"] > len(g["refs"]) else "")
                + f"), {g['first_at']} to {g['last_at']}" for g in bulk["groups"]]
    out += ["", "## The fleet now", ""]
    out += _section("Unpushed commits", fleet["unpushed_count"], [
        f"{md_text(u['repo'])} {md_code(u['branch'])}: " + (f"{u['ahead']} ahead of {md_text(u['upstream'])}"
                                                           if u["upstream"] else "no upstream (never pushed)")
        for u in fleet["unpushed"]])
    out += _section("Uncommitted changes", fleet["dirty_count"], [
        f"{md_text(d['repo'])}: {d['staged'] or 0} staged, {d['unstaged'] or 0} modified, "
        f"{d['untracked'] or 0} untracked" + (f", {d['conflicted']} conflicted" if d["conflicted"] else "")
        for d in fleet["dirty"]])
    out += _section("Stashes older than a week", fleet["stale_stash_count"], [
        f"{md_text(s['repo'])} stash@{{{s['index']}}} from {s['at']}: {md_text(one_line(s['message'], 80))}"
        for s in fleet["stale_stashes"]])
    out += _section("History rewrites in this window", fleet["rewrite_count"], [
        f"{md_text(r['repo'])} {md_text(r['ref'])} `{r['kind']}` at {r['at']}: {_md_sha(r['old_sha'])} → "
        f"{_md_sha(r['new_sha'])}" for r in fleet["rewrites"]])
    out += _section("Recoverable commits (no ref reaches them)", fleet["recoverable_count"], [
        f"{md_text(c['repo'])} {md_code(short(c['sha']))} {md_text(one_line(c['subject'], 80))} — dropped by "
        f"{md_text(c['dropped_by'])} on {md_text(c['ref'])} at {c['dropped_at']}; recover with "
        + md_code(f"git -C {shlex.quote(c['path'])} branch recovered-{c['sha'][:8]} {c['sha']}")
        for c in fleet["recoverable"]])
    for err in data["digest"]["errors"] + fleet["errors"]:
        out.append(f"- could not read {md_text(err['repo'])}: {md_text(err['error'])}")
    return "\n".join(out) + "\n"


def _md_sha(sha: str | None) -> str:
    return md_text(short(sha))


def _section(title: str, count: int, lines: list[str]) -> list[str]:
    if not count:
        return [f"- **{title}:** none"]
    more = [f"  - … and {count - len(lines)} more"] if count > len(lines) else []
    return [f"- **{title}:** {count}"] + [f"  - {line}" for line in lines] + more


def render_html(data: dict) -> str:
    return environment().get_template("digest.html").render(data=data, chart=chart_geometry(data["activity"]))


CELL, GAP, LABEL_W, HEADER_H = 24, 3, 200, 38  # cells big enough to read and to point at
MIN_LABEL_EVERY = 3


def chart_geometry(activity: dict) -> dict:
    """Pixel layout of the events-per-repo-per-day heat map (the template only draws it)."""
    days, rows = activity["days"], activity["rows"]
    peak = activity["max"] or 1
    cells = []
    for y, row in enumerate(rows):
        for x, count in enumerate(row["counts"]):
            cells.append({"x": LABEL_W + x * (CELL + GAP), "y": HEADER_H + y * (CELL + GAP), "count": count,
                          "day": days[x], "repo": row["repo"],
                          "opacity": 0 if not count else round(0.2 + 0.8 * count / peak, 3)})
    every = max(MIN_LABEL_EVERY, len(days) // 8)  # a "MM-DD" label is about three cells wide
    labels = [{"x": LABEL_W + x * (CELL + GAP), "text": day[5:]} for x, day in enumerate(days) if x % every == 0]
    return {"width": LABEL_W + len(days) * (CELL + GAP) + 40, "height": HEADER_H + len(rows) * (CELL + GAP) + 4,
            "cell": CELL, "cells": cells, "labels": labels, "header_h": HEADER_H,
            "rows": [{"y": HEADER_H + y * (CELL + GAP) + CELL - 3, "repo": r["repo"], "total": r["total"]}
                     for y, r in enumerate(rows)], "label_w": LABEL_W}
