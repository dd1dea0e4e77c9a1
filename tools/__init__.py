"""Developer tools built on impl's public hooks and the law harness (not installed with
the packages; run them from the repository: ``python -m tools.<name>``)."""
