"""The person's TOML files (settings, policy) share one bounded reader: links followed, FIFOs and oversized
files refused with the caller's error code and without blocking."""

import os

import pytest

from fleet.errors import FleetError
from fleet.ops.policy import MAX_POLICY_BYTES, parse_policy_file
from fleet.presence.switches import presence_switches
from fleet.settings import load_settings, read_toml


def test_a_linked_settings_file_is_followed(tmp_path):
    real = tmp_path / "dotfiles" / "settings.toml"
    real.parent.mkdir()
    real.write_text("[presence]\nrecord_mcp_clients = false\n[audit]\nsegments_kept = 3\n")
    link = tmp_path / "settings.toml"
    link.symlink_to(real)
    assert presence_switches({"FLEETDECK_SETTINGS": str(link)}) == {
        "read_agent_sessions": True, "record_mcp_clients": False}
    assert load_settings(link)["audit"]["segments_kept"] == 3


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "settings.toml"
    os.mkfifo(fifo)
    with pytest.raises(FleetError) as err:
        presence_switches({"FLEETDECK_SETTINGS": str(fifo)})
    assert err.value.code == "BAD_ARGUMENT" and "not a regular file" in err.value.message
    with pytest.raises(FleetError) as err:
        parse_policy_file(fifo)
    assert err.value.code == "POLICY_INVALID"


def test_sizes_and_encodings_are_bounded(tmp_path):
    big = tmp_path / "policy.toml"
    big.write_bytes(b"#" * (MAX_POLICY_BYTES + 1))
    with pytest.raises(FleetError) as err:
        parse_policy_file(big)
    assert err.value.code == "POLICY_INVALID" and "larger than" in err.value.message
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b"# caf\xe9\n")
    with pytest.raises(FleetError) as err:
        read_toml(latin, 1024, "BAD_ARGUMENT", "settings file")
    assert "not valid TOML" in err.value.message
    assert read_toml(tmp_path / "absent.toml", 1024, "BAD_ARGUMENT", "settings file") is None


def test_a_wrong_type_in_presence_names_the_key(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("[presence]\nread_agent_sessions = 'no'\n")
    with pytest.raises(FleetError) as err:
        presence_switches({"FLEETDECK_SETTINGS": str(path)})
    assert "presence.read_agent_sessions" in err.value.message
