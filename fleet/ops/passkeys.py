"""Passkeys: WebAuthn credentials (with user verification) that confirm a person's decision.

A program running as the person can read every file and drive every terminal; it cannot make the person's
authenticator verify them (a fingerprint, a PIN on a security key). So once a passkey is registered, approving
a high-risk proposal needs a fresh assertion with user verification (`[passkeys] require = "high"`, the
default), or every decision does (`"all"`), or none (`"off"`). The challenge of an assertion is bound to one
proposal (its digest is part of the challenge, and the adapter keeps it under that proposal's id) and used
once. Credentials live in the index (`meta`, one row per credential: id, public key, sign count).

WebAuthn's relying-party id is a host name, never an IP address: passkeys work on `http://localhost:PORT`
(a secure context), not on `127.0.0.1` (`rp_id_for` says so).

The WebAuthn library is imported by the four functions that use it, not here: with pyOpenSSL and pyasn1 it
costs ~0.2 s of CPU, and `serve` imports this module on its way to the first page (a cold start's reads of
every repo share the cores with that import), long before anyone registers or uses a passkey.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import secrets
import time

from fleet.errors import FleetError
from fleet.index.store import Index
from fleet.settings import load_settings

PREFIX = "passkey:"
MODES = ("high", "all", "off")
RP_NAME = "fleetdeck"
USER_ID = b"fleetdeck-person"  # one person per fleetdeck: every passkey is theirs


def rp_id_for(host: str) -> str:
    """The relying-party id for a dashboard reached at `host`; an IP address cannot be one."""
    name = host.strip().strip("[]").lower()
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return name
    raise FleetError("PASSKEY_NEEDS_LOCALHOST", f"passkeys cannot work on {name} (WebAuthn needs a host name): "
                                                "open the dashboard on http://localhost:<port>/ — the same link "
                                                "with `localhost` for the address")


def registered(index: Index) -> list[dict]:
    """Every registered passkey: id, name, created_at, sign_count (the public key stays in the index)."""
    return [{k: v for k, v in json.loads(value).items() if k != "public_key"} for _, value in index.meta_like(PREFIX)]


def mode() -> str:
    value = load_settings()["passkeys"]["require"]
    if value not in MODES:
        raise FleetError("BAD_ARGUMENT", f"[passkeys] require must be one of {', '.join(MODES)}, not {value!r}")
    return value


def required(index: Index, risk: str | None) -> bool:
    """Whether deciding something of this risk (None: a reject or an undo) needs a passkey assertion."""
    wanted = mode()
    if wanted == "off" or not registered(index):
        return False
    return wanted == "all" or risk == "high"


def registration_options(index: Index, rp_id: str) -> tuple[str, bytes]:
    """(options JSON for `navigator.credentials.create`, the challenge to keep for `register`)."""
    import webauthn
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.structs import (AuthenticatorSelectionCriteria, PublicKeyCredentialDescriptor,
                                          ResidentKeyRequirement, UserVerificationRequirement)

    options = webauthn.generate_registration_options(
        rp_id=rp_id, rp_name=RP_NAME, user_id=USER_ID, user_name="fleetdeck", user_display_name="fleetdeck",
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED, user_verification=UserVerificationRequirement.REQUIRED),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(p["id"]))
                             for p in registered(index)])
    return webauthn.options_to_json(options), options.challenge


def register(index: Index, credential: dict, challenge: bytes | None, origin: str, rp_id: str, name: str) -> dict:
    """Verify a new credential (user verification required) and store it; PASSKEY_REFUSED otherwise."""
    import webauthn
    from webauthn.helpers import bytes_to_base64url
    from webauthn.helpers.exceptions import WebAuthnException  # every malformed or failing ceremony's

    if challenge is None:
        raise FleetError("PASSKEY_REFUSED", "no registration was started in this tab (or it was used)")
    try:
        verified = webauthn.verify_registration_response(
            credential=credential, expected_challenge=challenge, expected_origin=origin, expected_rp_id=rp_id,
            require_user_verification=True)
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise FleetError("PASSKEY_REFUSED", f"the passkey was not registered: {exc}") from None
    record = {"id": bytes_to_base64url(verified.credential_id), "name": name[:80] or "passkey",
              "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rp_id": rp_id,
              "public_key": bytes_to_base64url(verified.credential_public_key), "sign_count": verified.sign_count}
    index.set_meta_texts({PREFIX + record["id"]: json.dumps(record)})
    return {k: v for k, v in record.items() if k != "public_key"}


def assertion_options(index: Index, rp_id: str, proposal_id: str) -> tuple[str, bytes]:
    """(options JSON for `navigator.credentials.get`, the challenge): random bytes, then the proposal id's
    digest, so the signed challenge names the one proposal it confirms."""
    import webauthn
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor, UserVerificationRequirement

    challenge = secrets.token_bytes(16) + hashlib.sha256(proposal_id.encode()).digest()[:16]
    options = webauthn.generate_authentication_options(
        rp_id=rp_id, challenge=challenge, user_verification=UserVerificationRequirement.REQUIRED,
        allow_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(p["id"]))
                           for p in registered(index)])
    return webauthn.options_to_json(options), challenge


def confirm(index: Index, credential: object, challenge: bytes | None, origin: str, rp_id: str) -> None:
    """Verify an assertion (user verification required) against the challenge kept for this proposal and a
    registered credential; the sign count moves on. PASSKEY_REQUIRED when there is none to check."""
    import webauthn
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.exceptions import WebAuthnException

    if not isinstance(credential, dict) or challenge is None:
        raise FleetError("PASSKEY_REQUIRED", "this decision needs your passkey: confirm it on the dashboard "
                                             "(on localhost) when asked")
    stored = index.meta_text(PREFIX + str(credential.get("id", "")))
    if stored is None:
        raise FleetError("PASSKEY_REFUSED", "that passkey is not registered with this fleetdeck")
    record = json.loads(stored)
    try:
        verified = webauthn.verify_authentication_response(
            credential=credential, expected_challenge=challenge, expected_origin=origin, expected_rp_id=rp_id,
            credential_public_key=base64url_to_bytes(record["public_key"]),
            credential_current_sign_count=record["sign_count"], require_user_verification=True)
    except (WebAuthnException, ValueError, KeyError, TypeError) as exc:
        raise FleetError("PASSKEY_REFUSED", f"the passkey did not confirm this decision: {exc}") from None
    record["sign_count"] = verified.new_sign_count
    index.set_meta_texts({PREFIX + record["id"]: json.dumps(record)})
