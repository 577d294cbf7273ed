"""Patch authoring: structured changes in, a unified diff `git apply --check` accepts out (fleet.patch.generate),
plus a patch-file store (fleet.patch.file). These never touch a repository: with `patch_file` they write that
one `.patch`/`.diff` file in fleetdeck's own patch folder (fleet.patch.folder), never inside a repository,
where patch-package and the like would apply it; `operation.preview.patch_file_write` puts one into a
repository once a person approves. patch.inspect and patch.validate also read patch files inside a fleet
root. Nothing here applies a patch to a repository."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from mcp.types import ToolAnnotations

from fleet.patch.file import MAX_PATCH_BYTES, inspect_patch, remove_patch_entries, validate_patch
from fleet.patch.generate import MAX_CHANGES, generate_patch
from fleet.patch.folder import agent_patch_file, readable_patch_file
from mcp_bridge import models
from mcp_bridge.toolkit import MAX_TOOL_INPUT, READ_ONLY, Toolkit
from mcp_bridge.tools_repo import Repo

WRITES_PATCH_FILE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                                    open_world_hint=False)
PatchFile = Annotated[str, Field(min_length=1, max_length=4096,
                                 description="a .patch/.diff file in fleetdeck's patch folder: its name (fix.patch) "
                                             "or absolute path (reads also take one inside a fleet root)")]
Text = Annotated[str, Field(max_length=4 * 1024 * 1024)]  # and all of a call's arguments: MAX_TOOL_INPUT


class Replacement(BaseModel):
    model_config = ConfigDict(extra="forbid")
    search: Text
    replace: Text
    line_hint: Annotated[int | None, Field(ge=1, description="1-based line the match is nearest to")] = None


class FileChange(BaseModel):
    """One intended change; which fields apply depends on `mode` (see the tool description)."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["file_content", "search_replace", "create_file", "delete_file", "text_pair", "rename_file",
                  "chmod"]
    path: Annotated[str | None, Field(min_length=1, max_length=4096,
                                      description="relative to the repository root (or absolute inside it)")] = None
    file_path: Annotated[str | None, Field(min_length=1, max_length=4096,
                                           description="uni-diff-patch's name for path")] = None
    encoding: Annotated[str | None, Field(max_length=64, description="the file's encoding (default utf-8): "
                                                                     "latin-1, cp1252, shift_jis, euc_jp, gbk ...")] = None
    new_content: Text | None = None
    replacements: Annotated[list[Replacement] | None, Field(max_length=200)] = None
    old_text: Text | None = None
    new_text: Text | None = None
    new_path: Annotated[str | None, Field(max_length=4096)] = None
    new_mode: Literal["100644", "100755"] | None = None
    old_mode: Literal["100644", "100755"] | None = None


def register(kit: Toolkit) -> None:
    bridge = kit.bridge

    def scoped(patch_file: str | None) -> str | None:
        return readable_patch_file(bridge.index(), patch_file) if patch_file is not None else None

    def writable(patch_file: str | None) -> str | None:
        return agent_patch_file(bridge.index().path, patch_file) if patch_file is not None else None

    @kit.tool("patch.generate", models.PatchGenerated, "Write a patch from intended changes",
              annotations=WRITES_PATCH_FILE)
    def generate(changes: Annotated[list[FileChange], Field(min_length=1, max_length=MAX_CHANGES)],
                 repo: Annotated[Repo | None, Field(description="the repository (needed unless every change is "
                                                                "a text_pair)")] = None,
                 context_lines: Annotated[int, Field(ge=1, le=20)] = 3, patch_file: PatchFile | None = None,
                 write_mode: Literal["append", "upsert", "overwrite", "create_only"] = "append",
                 check: Annotated[bool, Field(description="run git apply --check")] = True) -> dict:
        """Turn intended changes into one unified diff against the repository's working tree.

        Modes: file_content {path, new_content}; search_replace {path, replacements: [{search, replace,
        line_hint?}]} (each search must match once, or nearest to line_hint); create_file {path,
        new_content, new_mode?}; delete_file {path}; text_pair {path, old_text, new_text} (needs no file and
        no repo: its path is only a name); rename_file {path, new_path, new_content?}; chmod {path, new_mode,
        old_mode?, new_content?}. `file_path` is accepted for `path`; `encoding` (default utf-8) reads and
        writes a Latin-1, Shift-JIS ... file in its own encoding. With `patch_file` the entries are stored
        in that file of fleetdeck's patch folder (append | upsert | overwrite | create_only) and the report
        says per entry what was added, replaced or removed, where, and why, with coded warnings. Nothing in
        the repository changes (to put the patch file there: operation.preview.patch_file_write).
        """
        plain: list[dict[str, Any]] = [c.model_dump(exclude_none=True) for c in changes]
        for change, model in zip(plain, changes):
            if model.replacements is not None:
                change["replacements"] = [r.model_dump(exclude_none=True) for r in model.replacements]
        path = bridge.resolve(repo).path if repo is not None else None
        return generate_patch(path, plain, context_lines, writable(patch_file), write_mode, check)

    @kit.tool("patch.inspect", models.PatchInspected, "List a patch file's entries")
    def inspect(patch_file: PatchFile) -> dict:
        """The entries of a patch file: path, kind (modify, create, delete, rename, copy, chmod), hunks and
        line counts, and paths held by more than one entry."""
        return inspect_patch(scoped(patch_file))

    @kit.tool("patch.remove", models.PatchRemoved, "Drop entries from a patch file",
              annotations=WRITES_PATCH_FILE)
    def remove(patch_file: PatchFile,
               paths: Annotated[list[Annotated[str, Field(max_length=4096)]] | None, Field(max_length=1000)] = None,
               indices: Annotated[list[Annotated[int, Field(ge=0)]] | None, Field(max_length=1000)] = None) -> dict:
        """Remove entries from a patch file by path and/or 0-based index; nothing is written when one is
        not found."""
        return remove_patch_entries(writable(patch_file), paths, indices)

    @kit.tool("patch.validate", models.PatchValidated, "Check a patch", annotations=READ_ONLY)
    def validate(patch: Annotated[str | None, Field(max_length=min(MAX_PATCH_BYTES, MAX_TOOL_INPUT))] = None,
                 patch_file: PatchFile | None = None, repo: Repo | None = None) -> dict:
        """Does a patch (text, or a patch file) parse, and would `git apply --check` accept it in `repo`?
        A patch that does not parse is an answer (`valid: false`), not a failure."""
        path = bridge.resolve(repo).path if repo is not None else None
        return validate_patch(patch, scoped(patch_file), path)
