"""`fleetdeck audit verify|export|anchor|keygen|status`: the audit log on the command line.

`verify` exits 0 when the log is intact, 3 when it is not (the first bad seq and the reason are printed), 4 when
it is intact but degraded (a process, alive or ended, could not append entries: they are missing from the
chain), 2 on a usage error (an unreadable key or anchor, `--require-signed` without any key to check with).
`status` says `degraded` in the same case, whichever process it was.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fleet.errors import FleetError

EXIT_TAMPERED = 3
EXIT_DEGRADED = 4
EXIT_USAGE = 2


def add_parsers(sub: argparse._SubParsersAction) -> None:
    audit = sub.add_parser("audit", help="the tamper-evident audit log: verify, export, anchor, keygen, status")
    actions = audit.add_subparsers(dest="audit_command", metavar="{verify,export,anchor,keygen,status}")
    actions.required = True

    p = actions.add_parser("verify", help="check the hash chain and signatures; exit 0 intact, 3 tampered")
    p.add_argument("--pubkey", action="append", default=[], metavar="PEM",
                   help="trust only these public keys (repeatable; default: the configured and kept keys)")
    p.add_argument("--require-signed", action="store_true", help="an unsigned entry is a failure")
    p.add_argument("--anchor", metavar="FILE|JSON", help="an `audit anchor` output the log must still reach")
    p.add_argument("--workers", type=int, metavar="N",
                   help="processes checking signatures beside the chain pass (default: one per CPU; 1: none)")
    p.add_argument("--team", metavar="DSN", help="verify the hub's copy of a machine's chain (with --machine), and "
                                                 "that it agrees with this machine's own log when it is that machine")
    p.add_argument("--machine", metavar="NAME", help="whose chain on the hub (--team)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_verify)

    p = actions.add_parser("export", help="entries as JSON lines or CSV (not verified: run verify too)")
    p.add_argument("--since", help="24h, 7d, ISO 8601 or unix ms (default: everything)")
    p.add_argument("--until", help="same forms; entries before this time")
    p.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=cmd_export)

    p = actions.add_parser("anchor", help="print the log's head (seq, hash, signature) to keep elsewhere")
    p.set_defaults(func=cmd_anchor)

    p = actions.add_parser("keygen", help="create an Ed25519 signing key pair and say how to configure it")
    p.add_argument("--out-dir", metavar="DIR", help="where to write the pair (default: the config's audit-keys/)")
    p.set_defaults(func=cmd_keygen)

    p = actions.add_parser("status", help="where the log is, whether it is on and signed, and its head")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    for action in actions.choices.values():
        action.add_argument("--dir", metavar="DIR", help="the audit folder (default: the configured one)")


def _folder(args: argparse.Namespace) -> Path:
    from fleet.audit.config import resolve

    return Path(args.dir).expanduser() if args.dir else resolve(args.db).dir


def _usage(message: str) -> int:
    print(f"fleetdeck: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def cmd_verify(args: argparse.Namespace) -> int:
    from fleet.audit.verify import verify_log

    if args.team or args.machine:
        return _verify_team(args)
    folder = _folder(args)
    if not folder.is_dir():
        return _usage(f"no audit folder at {folder}")
    from fleet.audit.config import resolve
    from fleet.audit.keys import trusted_keys

    try:
        keys = trusted_keys(None if args.pubkey else resolve(args.db), args.pubkey)
        anchor = _load_anchor(args.anchor) if args.anchor else None
    except FleetError as exc:
        return _usage(exc.message)
    if args.workers is not None and args.workers < 1:
        return _usage("--workers must be 1 or more")
    if args.require_signed and not keys:
        return _usage("--require-signed needs a public key: pass --pubkey PEM or configure audit.key")
    try:
        report = verify_log(folder, keys, require_signed=args.require_signed, anchor=anchor, workers=args.workers)
    except FleetError as exc:
        return _usage(exc.message)
    spells = _degraded(args)
    if args.json:
        json.dump({"folder": str(folder), **report.as_dict(), "degraded": spells}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_report(folder, report)
        _print_degraded(spells)
    return EXIT_TAMPERED if not report.ok else (EXIT_DEGRADED if spells else 0)


def _verify_team(args: argparse.Namespace) -> int:
    """The hub's copy of machine NAME's chain; compared with this machine's log when NAME is this machine
    (or `--dir` names that machine's audit folder)."""
    from fleet.audit.config import resolve
    from fleet.audit.keys import trusted_keys
    from fleet.team import config as team_config
    from fleet.team.verify import verify_hub

    if not (args.team and args.machine):
        return _usage("--team DSN and --machine NAME go together")
    try:
        keys = trusted_keys(None if args.pubkey else resolve(args.db), args.pubkey)
        joined = team_config.load()
    except FleetError as exc:
        return _usage(exc.message)
    mine = args.dir or (joined is not None and joined.machine == args.machine)
    report = verify_hub(args.team, args.machine, keys, _folder(args) if mine else None,
                        _pushed_as(args) if mine and not args.dir else None)
    if args.json:
        json.dump(report.as_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        where = f"machine {report.machine} on {report.hub}"
        span = f"{report.entries} entries ({report.signed} signed), seq {report.first_seq}..{report.last_seq}"
        if report.ok:
            print(f"audit chain of {where}: intact: {span}")
        else:
            print(f"audit chain of {where}: NOT INTACT at seq {report.first_bad_seq} ({report.reason}): {span}")
            for problem in report.problems[1:6]:
                print(f"  also {problem}")
        print("  compared with this machine's own log: " + (
            f"agrees ({report.not_pushed_yet} newer entries not pushed yet)" if report.compared_with_local and report.ok
            else "differs" if report.compared_with_local else "not compared (not this machine: pass --dir)"))
    return 0 if report.ok else EXIT_TAMPERED


def _pushed_as(args: argparse.Namespace) -> str | None:
    """The chain this machine's index says its audit log was pushed as (None: not known, or no index here)."""
    from fleet.index.store import default_db_path, open_index
    from fleet.team.auditchain import known

    path = Path(args.db).expanduser() if args.db else default_db_path()
    if not path.exists():
        return None
    try:
        index = open_index(path)
    except (FleetError, OSError):
        return None
    try:
        return known(index, _folder(args))[0]
    finally:
        index.close()


def _degraded(args: argparse.Namespace) -> list[dict]:
    """Every process's degraded spell not yet recorded as a gap (read from the state files beside the index)."""
    from fleet.audit.config import resolve
    from fleet.audit.degraded import DegradedState

    keys = ("process", "pid", "role", "since", "last_at", "lost", "error", "alive")
    return [{k: s.get(k) for k in keys} for s in DegradedState(resolve(args.db).data_dir).others()]


def _print_degraded(spells: list[dict]) -> None:
    for s in spells:
        after = ("; it ended: the next append records the gap" if not s["alive"] else "")
        print(f"  DEGRADED: process {s['pid']} ({s['role']}) could not append {s['lost']} entries between "
              f"{s['since']} and {s['last_at']} ({s['error']}){after}")


def _print_report(folder: Path, report) -> None:
    counts = (f"{report.entries} entries ({report.signed} signed, {report.unsigned} unsigned) in "
              f"{report.segments} segment(s), seq {report.first_seq}..{report.last_seq}")
    if report.ok:
        print(f"audit log {folder}: intact, verified up to seq {report.verified_through}: {counts}")
    else:
        print(f"audit log {folder}: NOT INTACT at seq {report.first_bad_seq} ({report.reason}): {report.detail}"
              f" [{report.segment or 'checkpoint'}]")
        print(f"  verified up to seq {report.verified_through}: {counts}")
    if report.signed and not report.signatures_checked:
        print("  signatures were not checked: no public key given or configured")
    elif report.keys:
        print(f"  signatures checked with key(s) {', '.join(report.keys)}")
    if report.checkpoint:
        print(f"  older entries pruned through seq {report.checkpoint['seq']} (checkpoint)")
    if report.anchor:
        print(f"  anchor seq {report.anchor['seq']}: "
              + ("reached" if report.anchor["reached"] else "older than the retained log (not comparable)"))
    else:
        print("  a verified chain cannot show that entries after its last seq were cut off: keep "
              "`fleetdeck audit anchor` output elsewhere and pass it with --anchor")


def _load_anchor(source: str) -> dict:
    text = source
    if not source.lstrip().startswith("{"):
        try:
            text = Path(source).read_text(encoding="utf-8")[:65536]
        except OSError as exc:
            raise FleetError("BAD_ARGUMENT", f"cannot read anchor {source}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except ValueError:
        raise FleetError("BAD_ARGUMENT", "the anchor is not JSON from `fleetdeck audit anchor`") from None
    if not isinstance(value, dict) or not isinstance(value.get("seq"), int) or not isinstance(value.get("hash"), str):
        raise FleetError("BAD_ARGUMENT", "the anchor needs a seq and a hash (`fleetdeck audit anchor` output)")
    return value


def cmd_export(args: argparse.Namespace) -> int:
    from fleet.audit.read import export
    from fleet.timespec import iso
    from fleet.timespec import parse_since

    folder = _folder(args)
    since = iso(parse_since(args.since)) if args.since else None
    until = iso(parse_since(args.until)) if args.until else None
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8", newline="") as fh:
                count = export(folder, fh, args.format, since, until)
        except OSError as exc:
            raise FleetError("BAD_PATH", f"cannot write {args.out}: {exc.strerror}") from None
        print(f"exported {count} entries to {args.out}", file=sys.stderr)
    else:
        export(folder, sys.stdout, args.format, since, until)
    return 0


def cmd_anchor(args: argparse.Namespace) -> int:
    from fleet.audit.read import anchor_of, newest

    folder = _folder(args)
    head, _ = newest(folder, 1)
    if not head:
        raise FleetError("NOT_FOUND", f"the audit log in {folder} has no entries yet")
    print(json.dumps(anchor_of(head[0]), sort_keys=True, separators=(",", ":")))
    return 0


def cmd_keygen(args: argparse.Namespace) -> int:
    from fleet.audit.config import keys_dir
    from fleet.audit.keys import keygen
    from fleet.settings import settings_path

    kid, secret, public = keygen(Path(args.out_dir or keys_dir()))
    print(f"key {kid}\n  private: {secret} (0600; keep it readable by you alone)\n  public:  {public}\n"
          f"Sign the audit log with it: add to {settings_path()}\n\n  [audit]\n  key = \"{secret}\"\n\n"
          f"or export FLEETDECK_AUDIT_KEY={secret}\n"
          f"Keep a copy of the public key elsewhere: `fleetdeck audit verify --pubkey {public.name}` checks "
          "the log against it. Old keys stay valid for the entries they signed: keep their .pub.pem files.")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from fleet.audit.config import resolve
    from fleet.audit.keys import load_signer
    from fleet.audit.read import newest
    from fleet.audit.segments import segment_files

    config = resolve(args.db)
    if config.settings_error:
        raise FleetError("BAD_ARGUMENT", config.settings_error)
    folder = _folder(args)
    head, _ = newest(folder, 1)
    torn = sorted(p.name for p in folder.glob("torn-*.part")) if folder.is_dir() else []
    spells = _degraded(args) if config.enabled else []
    info = {"enabled": config.enabled, "state": "off" if not config.enabled else ("degraded" if spells else "ok"),
            "degraded": spells, "dir": str(folder), "segments": len(segment_files(folder)),
            "torn_lines_set_aside": torn,
            "key_id": load_signer(config.key).key_id if config.key else None,
            "head": {"seq": head[0]["seq"], "hash": head[0]["hash"], "at": head[0]["at"]} if head else None}
    if args.json:
        json.dump(info, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        state = "on" if info["enabled"] else "OFF (audit.enabled = false or FLEETDECK_AUDIT=off)"
        print(f"audit log: {state}\n  folder: {folder} ({info['segments']} segment(s))\n  signing key: "
              f"{info['key_id'] or 'none (entries are unsigned)'}\n  head: "
              + (f"seq {head[0]['seq']} at {head[0]['at']}" if head else "no entries yet"))
        for name in torn:
            print(f"  set aside after a crash (kept, recorded in the chain): {folder / name}")
        _print_degraded(spells)
    return 0
