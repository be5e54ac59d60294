#!/usr/bin/env python3
"""Runs one Python test module of the server with unittest (ctest calls this).

Exit 77 (ctest: skipped) when the test dependencies (openai, prometheus_client) are missing,
unless DSA_REQUIRE_PY_TESTS=1 (CI sets it: there a missing dependency is a failure).
"""
import importlib
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

missing = []
for mod in ("openai", "prometheus_client"):
    try:
        importlib.import_module(mod)
    except ImportError:
        missing.append(mod)
if missing:
    msg = f"python test dependencies missing: {', '.join(missing)} (scripts/install-deps.sh installs them)"
    if os.environ.get("DSA_REQUIRE_PY_TESTS") == "1":
        print("FAIL: " + msg)
        sys.exit(1)
    print("SKIP: " + msg)
    sys.exit(77)

suite = unittest.defaultTestLoader.loadTestsFromName(sys.argv[1])
result = unittest.TextTestRunner(verbosity=2).run(suite)
sys.exit(0 if result.wasSuccessful() else 1)
