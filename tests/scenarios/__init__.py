"""Semantic scenarios: one data format (``format.py``), the data (``*.toml``) and one runner per
engine (``on_simulator.py``, ``on_spark.py``; Beam's is ``tests/conformance/beam_generate.py``)."""
