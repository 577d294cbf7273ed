"""Each service's documented message for one inbox item, or for a burst's summary: ntfy's JSON publish
(title, message, priority, a `view` action), Slack's and Discord's incoming webhooks (`text`, `content`;
Discord with every mention disabled, so a repo named `@everyone` pings nobody) and fleetdeck's own JSON,
signed with HMAC-SHA256 over `<timestamp>.<body>`.

With `include = "counts"` a message names no repo and no agent: only what kind of thing needs the person."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from fleet.notify.config import Notifier
from fleet.words import plural

TITLES = {"proposal": "A proposal waits for you", "waiting": "An agent waits on you",
          "discarded": "Uncommitted work was discarded", "conflict": "A conflict where an agent works"}
PRIORITY = {"proposal": 4, "waiting": 4, "discarded": 4, "conflict": 3}
SIGNATURE = "X-Fleetdeck-Signature"
TIMESTAMP = "X-Fleetdeck-Timestamp"


@dataclass(frozen=True)
class Message:
    title: str
    text: str
    url: str | None
    priority: int
    items: tuple[dict, ...]


def for_items(items: list[dict], include: str, base_url: str | None) -> Message:
    """One item's message, or one summary of several."""
    link = (lambda path: f"{base_url.rstrip('/')}{path}" if base_url else None)
    if len(items) == 1:
        item = items[0]
        text = item["summary"] if include == "names" else f"{TITLES[item['kind']]} (open fleetdeck to see it)"
        return Message(TITLES[item["kind"]], text, link(item["url"]), PRIORITY[item["kind"]], (item,))
    counts = {}
    for item in items:
        counts[item["kind"]] = counts.get(item["kind"], 0) + 1
    words = {"proposal": "proposal", "waiting": "waiting agent", "discarded": "discard", "conflict": "conflict"}
    text = ", ".join(plural(n, words[k]) for k, n in counts.items())
    if include == "names":
        repos = sorted({i["repo"] for i in items if i.get("repo")})
        text += f" in {', '.join(repos[:5])}{' …' if len(repos) > 5 else ''}" if repos else ""
    return Message(f"{len(items)} things need you", text, link("/inbox"), 4, tuple(items))


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def request(notifier: Notifier, message: Message, include: str, now: float) -> tuple[str, dict, bytes]:
    """(URL, headers, body) of one POST."""
    headers = {"Content-Type": "application/json", "User-Agent": "fleetdeck"}
    if notifier.kind == "ntfy":
        parts = urlsplit(notifier.url)
        base, _, topic = parts.path.rstrip("/").rpartition("/")
        body = {"topic": topic, "title": message.title, "message": message.text, "priority": message.priority,
                "tags": ["fleetdeck"]}
        if message.url:
            body["click"] = message.url
            body["actions"] = [{"action": "view", "label": "Open", "url": message.url}]
        return urlunsplit((parts.scheme, parts.netloc, base + "/", "", "")), headers, json.dumps(body).encode()
    if notifier.kind == "slack":
        text = f"*{_slack_escape(message.title)}*\n{_slack_escape(message.text)}"
        if message.url:
            text += f"\n<{message.url}|Open in fleetdeck>"
        return notifier.url, headers, json.dumps({"text": text}).encode()
    if notifier.kind == "discord":
        content = f"**{message.title}**\n{message.text}" + (f"\n{message.url}" if message.url else "")
        return notifier.url, headers, json.dumps({"content": content[:2000], "username": "fleetdeck",
                                                  "allowed_mentions": {"parse": []}}).encode()
    keep = ("kind", "repo", "agent", "since", "summary", "url") if include == "names" else ("kind", "since")
    body = json.dumps({"type": "fleetdeck.inbox", "title": message.title, "text": message.text, "url": message.url,
                       "items": [{k: i.get(k) for k in keep} for i in message.items], "sent_at": int(now)},
                      sort_keys=True).encode()
    stamp = str(int(now))
    headers[TIMESTAMP] = stamp
    headers[SIGNATURE] = "sha256=" + sign(notifier.secret, stamp, body)
    return notifier.url, headers, body


def sign(secret: str, stamp: str, body: bytes) -> str:
    """The HMAC-SHA256 (hex) of `<timestamp>.<body>` under the webhook's secret."""
    return hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
