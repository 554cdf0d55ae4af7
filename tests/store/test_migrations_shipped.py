"""Migrations are append-only (SPEC 16): a file that has shipped never changes, since a database it made upgrades
in place by the files after it and never runs it again (the runner records each migration by its name, not its
text). Each shipped file is held to the digest it shipped with; a new migration is added here when it ships."""

from __future__ import annotations

import hashlib

from orchestrator.store.migrate import migration_files

# The first 16 hex digits of each shipped migration's SHA-256.
SHIPPED = {
    "0001_store.sql": "163a11b92f87b30f",
    "0002_lanes.sql": "152ff22eaeeaa8d0",
    "0003_retention.sql": "a8aa9fab081ea708",
    "0004_keys.sql": "51c38d261536f1f0",
    "0005_workflow_types.sql": "9168da3d80796d3b",
    "0006_crossings.sql": "4ea30981b1d3d462",
    "0007_routing.sql": "9c23a72582846795",
    "0008_by_reference.sql": "8aab387b82e30e01",
    "0009_run_errors.sql": "f301d1ee7ffee63c",
    "0010_app_declarations.sql": "f887449f46354704",
    "0011_own_schema.sql": "c73baa9ebf1a7faf",
    "0012_app_transactions.sql": "356e09e7072fec66",
    "0013_traced_lanes.sql": "2eefdaae95ade412",
    "0014_emit_without_keys.sql": "5d848089be1575db",
    "0015_run_end_reads.sql": "2526dcf64bc7d7b2",
    "0016_queue_taken_at_finish.sql": "77e7d76b88e51927",
    "0017_fewer_calls_per_event.sql": "883920c7cbac20cf",
    "0018_event_keys_in_place.sql": "43aa6ef40dcaa4ee",
    "0019_route_takes_free_key_slots.sql": "79999422e470c955",
    "0020_route_page_less_per_lane.sql": "1825be342fa0f226",
    "0021_route_plain_events_by_type.sql": "6921ad901af4775e",
    "0022_id_arrays_uncompressed.sql": "61b36bfd3b1d7e9b",
    "0023_fires_counted_in_order.sql": "ef52b2477aa2205a",
    "0024_route_lanes_as_rows.sql": "3014626b6f9aa78b",
    "0025_deleted_listeners_leave_routing.sql": "ad35edc3c52304ef",
    "0026_superseded_versions_leave_routing.sql": "b1387df04442aaa9",
    "0027_run_waits.sql": "65f4eae891f4e083",
    "0028_listener_throttle.sql": "d05ba1d00526a064",
    "0029_wakeups_coalesced.sql": "43a566d381cf59c6",
    "0030_sessions_behind_in_turn.sql": "b48cd1174d5b7aa0",
    "0031_listeners_notify_gone.sql": "5bcc1b599903bd3b",
    "0032_lane_queue_ranges.sql": "49d7632b171a05cf",
    "0033_captured_staged.sql": "274892af5f9eedd7",
    "0034_run_writes_fenced.sql": "6af590661430908f",
    "0035_captured_kinds_closed.sql": "702cef484f8f4b96",
    "0036_emits_stamped_at_commit.sql": "8617aa37bb8a9231",
}


def test_no_shipped_migration_has_changed_and_every_migration_is_held_to_its_digest() -> None:
    found = {name: hashlib.sha256(sql.encode()).hexdigest()[:16] for _, name, sql in migration_files()}
    changed = sorted(name for name, digest in SHIPPED.items() if found.get(name) != digest)
    assert not changed, f"shipped migrations changed or gone: {changed}; add a new migration instead"
    unheld = sorted(set(found) - set(SHIPPED))
    assert not unheld, f"migrations with no digest here: {unheld}; add each with its digest as it ships"
