"""Helpers for the tests: builders of captures (pcap/pcapng writers)."""
