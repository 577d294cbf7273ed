"""Previews that cannot lie, written as the attacks (real git, real repositories, a local bare remote).

- a patch with text git ignores (a padding block past the 64 KiB display cut, garbage between entries)
  hid the real hunk from the preview: refused at proposal time, naming why;
- a diff over the display limit lists every file with git's own +/- counts and becomes high risk;
- a patch payload over 1 MiB is refused (LIMIT);
- a push's destination is what git will use (pushurl, pushInsteadOf), pinned and re-checked (STALE);
  `ext::` / `fd::` URLs and repo-set `protocol.*.allow`, `remote.*.receivepack|uploadpack` are refused.
"""

from __future__ import annotations

import pytest

from fleet.errors import FleetError
from fleet.ops import service
from fleet.ops.model import MAX_PATCH_BYTES
from tests.fleets.gitbuild import bare_remote, commit_file, git
from tests.fleets.ops_fleet import propose, with_origin

REAL = """diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -1 +1,2 @@
 print('one')
+import os; os.system('touch pwned')
"""
SECOND = """diff --git a/README.md b/README.md
--- a/README.md
+++ b/README.md
@@ -1,2 +1,2 @@
-line 1
+line one
 line 1
"""


def refused(fleet, patch: str) -> FleetError:
    with pytest.raises(FleetError) as err:
        propose(fleet, "patch", {"patch": patch})
    return err.value


@pytest.mark.parametrize("padding", [
    "this text is ignored by git apply\n" * 2500,   # a preamble git skips, past the 64 KiB cut
    "\n" * 70_000,                                  # blank lines: skipped by git, and by a lenient parser
    " \t \n" * 20_000,
])
def test_padding_that_git_ignores_is_refused(ops_fleet, padding):
    error = refused(ops_fleet, padding + REAL)
    assert error.code == "BAD_ARGUMENT" and "git would ignore" in error.message, error.message
    assert "line 1" in error.message  # it says where


def test_garbage_between_entries_is_refused(ops_fleet):
    git(ops_fleet["work"], "checkout", "-q", "--", "README.md")
    error = refused(ops_fleet, REAL + "garbage git skips between two entries\n" + SECOND)
    assert error.code == "BAD_ARGUMENT" and "git would ignore" in error.message
    error = refused(ops_fleet, REAL + "trailing words\n")
    assert error.code == "BAD_ARGUMENT" and "git would ignore" in error.message


def test_a_canonical_patch_still_applies(ops_fleet):
    git(ops_fleet["work"], "checkout", "-q", "--", "README.md")
    made = propose(ops_fleet, "patch", {"patch": REAL + SECOND})
    assert made["preview"]["files"] == ["src/app.py", "README.md"]
    counts = {f["path"]: (f["added"], f["deleted"]) for f in made["preview"]["diff_files"]}
    assert counts == {"src/app.py": (1, 0), "README.md": (1, 1)}


def test_a_format_patch_mail_is_refused_with_a_reason(ops_fleet):
    mail = "From 0000 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\n" + REAL
    error = refused(ops_fleet, mail)
    assert error.code == "BAD_ARGUMENT" and "git would ignore" in error.message


def test_payload_over_one_mib_is_refused(ops_fleet):
    body = "".join(f"+{'x' * 100}\n" for _ in range(MAX_PATCH_BYTES // 100))
    big = f"diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n" \
          f"@@ -0,0 +1,{MAX_PATCH_BYTES // 100} @@\n{body}"
    error = refused(ops_fleet, big)
    assert error.code == "LIMIT" and "1 MiB" in error.message


def test_oversized_diff_lists_every_file_and_is_high_risk(ops_fleet):
    work = ops_fleet["work"]
    git(work, "checkout", "-q", "--", "README.md")
    lines = 4000
    body = "".join(f"+filler line {i:05d} of a long change\n" for i in range(lines))
    big = (f"diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n"
           f"@@ -0,0 +1,{lines} @@\n{body}")
    made = propose(ops_fleet, "patch", {"patch": big + REAL})
    preview = made["preview"]
    assert preview["diff_truncated"] is True and "import os" not in preview["diff"]
    files = {f["path"]: f for f in preview["diff_files"]}
    oracle = git(work, "apply", "--numstat", "-", input=(big + REAL).encode())
    assert {ln.split("\t")[2]: (int(ln.split("\t")[0]), int(ln.split("\t")[1]))
            for ln in oracle.splitlines()} == {p: (f["added"], f["deleted"]) for p, f in files.items()}
    assert files["src/app.py"]["shown"] is False and files["big.txt"]["shown"] == "partly"
    assert made["risk"] == "high"


def test_an_oversized_stage_lists_every_file_with_gits_counts(ops_fleet):
    work = ops_fleet["work"]
    commit_file(work, "big.txt", "".join(f"old line {i}\n" for i in range(5000)), "a big file")
    (work / "big.txt").write_text("".join(f"new line {i}\n" for i in range(5000)))
    (work / "src/app.py").write_text("print('one')\nimport os\n")
    made = propose(ops_fleet, "stage", {"paths": ["big.txt", "src/app.py"]})
    preview = made["preview"]
    assert preview["diff_truncated"] and "import os" not in preview["diff"] and made["risk"] == "high"
    oracle = [ln.split("\t") for ln in git(work, "diff", "--numstat", "--", "big.txt", "src/app.py").splitlines()]
    assert [(f["path"], f["added"], f["deleted"]) for f in preview["diff_files"]] == \
        [(p, int(a), int(d)) for a, d, p in oracle]
    assert [f["shown"] for f in preview["diff_files"]] == ["partly", False]


def test_a_plan_with_an_oversized_patch_step_is_high_risk(ops_fleet):
    body = "".join(f"+filler line {i:05d} of a long change\n" for i in range(4000))
    big = f"diff --git a/big.txt b/big.txt\nnew file mode 100644\n--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,4000 @@\n{body}"
    made = propose(ops_fleet, "plan", {"steps": [{"op": "patch", "args": {"patch": big}},
                                                 {"op": "stage", "args": {"paths": ["big.txt"]}}]})
    assert made["risk"] == "high"


# --- push ---------------------------------------------------------------------------------------------------

@pytest.fixture
def pushable(ops_fleet, tmp_path):
    return ops_fleet, with_origin(ops_fleet, tmp_path), tmp_path


def tip(repo) -> str:
    return git(repo, "rev-parse", "main").strip()


def test_preview_shows_the_pushurl_git_uses(pushable):
    fleet, remote, tmp = pushable
    elsewhere = bare_remote(tmp / "elsewhere.git")
    git(fleet["work"], "config", "remote.origin.pushurl", str(elsewhere))
    made = propose(fleet, "push", {})
    assert made["preview"]["push_urls"] == [str(elsewhere)]
    assert made["preview"]["url"] == str(elsewhere)
    assert made["preview"]["commits_sent"][0]["subject"] == "to push"


def test_preview_applies_push_instead_of(pushable):
    fleet, remote, tmp = pushable
    elsewhere = bare_remote(tmp / "rewritten.git")
    git(fleet["work"], "config", f"url.{elsewhere}.pushInsteadOf", str(remote))
    made = propose(fleet, "push", {})
    assert made["preview"]["push_urls"] == [str(elsewhere)]


def test_a_url_changed_after_the_preview_is_stale(pushable):
    fleet, remote, tmp = pushable
    made = propose(fleet, "push", {})
    assert made["preview"]["push_urls"] == [str(remote)]
    elsewhere = bare_remote(tmp / "swapped.git")
    git(fleet["work"], "config", "remote.origin.pushurl", str(elsewhere))
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and done["error"].startswith("STALE"), done["error"]
    assert done["result"]["touched"] is False
    assert git(elsewhere, "for-each-ref") == "" and tip(remote) != tip(fleet["work"])


def test_a_pushed_url_matches_the_preview(pushable):
    fleet, remote, _ = pushable
    made = propose(fleet, "push", {})
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "completed", done["error"]
    assert tip(remote) == tip(fleet["work"])


@pytest.mark.parametrize("key,value", [
    ("protocol.ext.allow", "always"),
    ("protocol.allow", "always"),
    ("remote.origin.receivepack", "touch {marker}; git-receive-pack"),
    ("remote.origin.uploadpack", "touch {marker}; git-upload-pack"),
])
def test_repo_set_transport_config_is_refused(pushable, key, value):
    fleet, _, tmp = pushable
    marker = tmp / "marker"
    git(fleet["work"], "config", key, value.format(marker=marker))
    with pytest.raises(FleetError) as err:
        propose(fleet, "push", {})
    assert err.value.code == "POLICY_DENIED" and key in err.value.message
    assert not marker.exists()


@pytest.mark.parametrize("url", ["ext::sh -c touch% {marker}", "fd::7"])
def test_ext_and_fd_urls_are_refused(pushable, url):
    fleet, _, tmp = pushable
    marker = tmp / "marker"
    git(fleet["work"], "config", "remote.origin.pushurl", url.format(marker=marker))
    with pytest.raises(FleetError) as err:
        propose(fleet, "push", {})
    assert err.value.code == "POLICY_DENIED" and url.split("::")[0] + "::" in err.value.message
    assert not marker.exists()


def test_ext_push_set_after_an_approved_preview_never_runs(pushable):
    """The attack as found: repo-set protocol.ext.allow + an ext:: push URL, set after the preview."""
    fleet, remote, tmp = pushable
    marker = tmp / "marker"
    made = propose(fleet, "push", {})
    git(fleet["work"], "config", "protocol.ext.allow", "always")
    git(fleet["work"], "config", "remote.origin.pushurl", f"ext::sh -c touch% {marker}")
    done = service.approve(fleet["index"], made["proposal_id"], "cli")
    assert done["status"] == "failed" and not marker.exists(), done
    assert done["error"].startswith("POLICY_DENIED") and done["result"]["touched"] is False
